import type { CanaryDesigns } from './canary-designs.js';
import { canonicalJson } from '../hash.js';
import type { DatasetProvenance } from '../contracts/dataset.js';
import { CanaryAuditError } from '../errors.js';
import type { GroupSummary } from '../metrics/aggregate.js';
import {
  cellLabel,
  compareCells,
  formatValue,
  groupCell,
  valueKey,
  type Axis,
  type AxisRoles,
  type Cell,
} from '../metrics/cells.js';
import type { PairedSummary } from '../metrics/paired.js';
import type { Observation } from '../metrics/observation.js';
import type { SpaceSummary } from '../metrics/space-check.js';
import { median } from '../metrics/statistics.js';
import {
  clopperPearsonEpsilon,
  membershipAuc,
  oneRunBound,
  tprAtFpr,
  type EpsilonBound,
  type Interval,
  type OneRunBound,
  type TprAtFpr,
} from '../metrics/privacy.js';
import { exposureCeiling } from '../metrics/exposure.js';
import { describeSchemaErrors, validate } from '../schemas/index.js';
import type { Numerics, RunFailure } from '../contracts/result.js';
import type { Provenance } from '../provenance/index.js';
import type { LoadedAudit, RunStatus } from './load-audit.js';
import type { RunOutcome } from './observe.js';
import { brief, provenanceWarnings, type ReportWarning, type StampBrief } from './provenance-check.js';
import { metricSummaries, type UtilityHeadline, type UtilityMetricSummary } from './utility.js';
import { membershipPools, type CellAuc, type EpsilonMax } from './privacy-max.js';
import type { ExtrapolationGroup } from './extrapolation.js';
import { gdpEpsilon, hullAuc, type GdpBound } from '../metrics/privacy-gdp.js';
import { fdpOneRunBound, strategyLabel, type FdpOneRunBound, type ThresholdStrategy } from '../metrics/privacy-fdp.js';
import { reportDesign, type ReportDesign } from './design.js';
import { verdicts, type ComparisonVerdict } from './verdicts.js';
import { sequentialSummary, type SequentialSummary } from './sequential-summary.js';
import type { SequentialRecord } from '../contracts/index.js';

/**
 * The JSON summary (schemas/report.schema.json, canary-audit.report/2): every aggregate with its n
 * and interval, every run with its status and stamps, and the report's own provenance. Other tools
 * read this file; its shape only changes with a new schema version.
 */
export const REPORT_VERSION = 'canary-audit.report/2';

export interface RunReport {
  run_id: string;
  cell_id: string;
  cell: Cell;
  status: RunStatus;
  no_canary: boolean;
  reason: string | null;
  failure: RunFailure | null;
  candidate_space: SpaceSummary | null;
  phases: string[];
  /** `metrics`: the generation metrics (accuracy, exact match, token F1) of a run whose manifest asks for them. */
  utility: {
    rows: number | null;
    base_loss: number | null;
    final_loss: number | null;
    delta: number | null;
    metrics?: UtilityMetricSummary[];
  } | null;
  provenance: { controller: StampBrief | null; trainer: StampBrief | null };
  /** The run's floating-point path, from result.json (null: not recorded). */
  numerics: Numerics | null;
}

/** One floating-point path among the audit's runs, and the runs that took it. */
export interface NumericsPath extends Numerics {
  runs: string[];
}

export interface UtilityGroup {
  cell: Cell;
  label: string;
  no_canary: boolean;
  n_runs: number;
  base_loss: number | null;
  final_loss: number | null;
  delta: number | null;
  /** Generation metrics pooled over the group's runs (only when some run has them). */
  metrics?: UtilityMetricSummary[];
}

export interface ReportSettings {
  seed: number;
  resamples: number;
  confidence: number;
  seed_axes: string[];
  dose_axis: string;
  main_phase: 'final';
  default_decode: 'prefill';
}

export interface ReportSummary {
  schema_version: typeof REPORT_VERSION;
  audit: {
    id: string;
    name: string;
    dir: string;
    grid_sha256: string | null;
    axes: { name: string; values: unknown[]; role: 'seed' | 'dose' | 'axis' }[];
  };
  settings: ReportSettings;
  counts: {
    runs: number;
    finished: number;
    failed: number;
    missing: number;
    no_canary_runs: number;
    observations: number;
    score_files: number;
  };
  /** The report's headline finding in one sentence, the one `run` prints (report/findings.ts); null without focal canaries. Written by computeReport; absent from summaries written before it. */
  headline?: string | null;
  runs: RunReport[];
  groups: GroupSummary[];
  paired: PairedSummary[];
  utility: UtilityGroup[];
  /** Per task: utility base → final beside the highest focal exposure (only when some run has generation metrics). */
  utility_headline?: UtilityHeadline[];
  /** Only when some manifest records a dataset: where the rows of each dataset-backed task came from. */
  datasets?: DatasetSource[];
  /** Only when some manifest randomizes inclusion: membership and ε readouts per run. */
  privacy?: PrivacyReadout[];
  /** With `privacy`: the largest ε lower bound over the runs, each run's bound at 1 − α/k (k runs searched). */
  epsilon_max?: EpsilonMax[];
  /** With `privacy`: per cell of 2+ runs, the AUC over its runs with the crossed canary × run interval. */
  privacy_auc?: CellAuc[];
  /** Only when the report extrapolated (sampled spaces): extrapolated beside rank exposure per cell, role and probe kind. */
  extrapolation?: ExtrapolationGroup[];
  /** Only for grids with a design axis: the designs side by side (report/canary-designs.ts). */
  canary_designs?: CanaryDesigns;
  /** Only when some result records its numerics: each distinct floating-point path and its runs. */
  numerics?: NumericsPath[];
  /** The replication design read from the manifests: what an interval over a cell's runs generalizes over. */
  design?: ReportDesign;
  /** One verdict per declared comparison (report/verdicts.ts). */
  verdicts?: ComparisonVerdict[];
  /** Sequential replicates: the looks and why each comparison stopped (report/sequential-summary.ts). */
  sequential?: SequentialSummary;
  warnings: ReportWarning[];
  provenance: Provenance;
}

export interface SummaryInput {
  audit: LoadedAudit;
  /** Axes named in labels. */
  labelAxes?: ReadonlySet<string>;
  outcomes: ReadonlyMap<string, RunOutcome>;
  observations: number;
  groups: GroupSummary[];
  paired: PairedSummary[];
  settings: ReportSettings;
  provenance: Provenance;
  /** Membership and ε readouts (`privacyReadouts`); absent or empty: none. */
  privacy?: PrivacyReadout[];
  /** The selection-aware largest ε bounds (`largestEpsilon`); only with `privacy`. */
  epsilonMax?: EpsilonMax[];
  /** Per-cell AUCs with the crossed interval (`cellAucs`); only with `privacy`. */
  privacyAuc?: CellAuc[];
  /** Extrapolated exposure groups (`extrapolationGroups`); absent or empty: none. */
  extrapolation?: ExtrapolationGroup[];
  /** The overview's utility headline, one per task (computeReport: only when some run has generation metrics). */
  utilityHeadline?: UtilityHeadline[];
  /** Controls that fail loud (`controlWarnings`): listed before every other warning. */
  controlWarnings?: ReportWarning[];
  /** Equivalence margin of the verdicts (bits; the grid's analysis.margin_bits). Default 1. */
  marginBits?: number;
  /** Sequential replicates: the looks' record; its stopped comparisons' verdicts replace the fixed reading. */
  sequential?: SequentialRecord | null;
  /** The designs side by side (`canaryDesigns`); null or absent: no design axis. */
  canaryDesigns?: CanaryDesigns | null;
}

type Stat = { seed: number; resamples: number; confidence: number };

function medianOrNull(values: (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null && Number.isFinite(v));
  return present.length === 0 ? null : median(present);
}

export function buildSummary(input: SummaryInput): ReportSummary {
  const { audit, outcomes, settings } = input;
  const roles: AxisRoles = { seedAxes: settings.seed_axes, doseAxis: settings.dose_axis };
  const stat = { seed: settings.seed, resamples: settings.resamples, confidence: settings.confidence };
  const runs = runReports(audit, outcomes, stat);
  const datasets = datasetSources(audit);
  const numerics = numericsPaths(runs);
  const privacy = input.privacy ?? [];
  const design = reportDesign(audit.runs, settings.seed_axes);
  const axisRole = (a: Axis): 'seed' | 'dose' | 'axis' =>
    settings.seed_axes.includes(a.name) ? 'seed' : a.name === settings.dose_axis ? 'dose' : 'axis';
  const summary: ReportSummary = {
    schema_version: REPORT_VERSION,
    audit: {
      id: audit.id,
      name: audit.name,
      dir: audit.dir,
      grid_sha256: audit.grid_sha256,
      axes: audit.axes.map((a) => ({ name: a.name, values: a.values, role: axisRole(a) })),
    },
    settings,
    counts: {
      runs: runs.length,
      finished: runs.filter((r) => r.status === 'finished').length,
      failed: runs.filter((r) => r.status === 'failed').length,
      missing: runs.filter((r) => r.status === 'missing').length,
      no_canary_runs: runs.filter((r) => r.no_canary).length,
      observations: input.observations,
      score_files: [...outcomes.values()].reduce((n, o) => n + o.scoreFiles, 0),
    },
    // Set by computeReport (report/findings.ts reads the whole summary); here so it comes near the top of summary.json.
    headline: null,
    runs,
    groups: input.groups,
    paired: input.paired,
    utility: utilityGroups(runs, outcomes, roles, audit.axes, input.labelAxes, stat),
    ...(input.utilityHeadline ? { utility_headline: input.utilityHeadline } : {}),
    ...(datasets.length > 0 ? { datasets } : {}),
    ...(numerics.length > 0 ? { numerics } : {}),
    ...(privacy.length > 0 ? { privacy } : {}),
    ...(privacy.length > 0 && input.epsilonMax && input.epsilonMax.length > 0 ? { epsilon_max: input.epsilonMax } : {}),
    ...(privacy.length > 0 && input.privacyAuc && input.privacyAuc.length > 0 ? { privacy_auc: input.privacyAuc } : {}),
    ...(input.extrapolation && input.extrapolation.length > 0 ? { extrapolation: input.extrapolation } : {}),
    ...(design ? { design } : {}),
    ...(input.canaryDesigns ? { canary_designs: input.canaryDesigns } : {}),
    warnings: [
      ...(input.controlWarnings ?? []),
      ...summaryWarnings(input, runs, roles),
      ...datasetWarnings(datasets),
      ...numericsWarnings(numerics, runs),
    ],
    provenance: input.provenance,
  };
  summary.verdicts = verdicts(summary, input.marginBits);
  if (input.sequential) Object.assign(summary, sequentialSummary(input.sequential, summary.verdicts));
  // The summary is a contract: check it against its own schema before anyone reads it.
  const errors = validate('report', JSON.parse(JSON.stringify(summary)));
  if (errors.length > 0) {
    throw new CanaryAuditError(
      'E_REPORT_SCHEMA',
      `report summary does not match schemas/report.schema.json: ${describeSchemaErrors(errors).slice(0, 5).join('; ')}`,
    );
  }
  return summary;
}

/** One entry per run of the audit: status, candidate space, phases, utility, provenance stamps. */
function runReports(audit: LoadedAudit, outcomes: ReadonlyMap<string, RunOutcome>, stat: Stat): RunReport[] {
  return audit.runs.map((run) => {
    const outcome = outcomes.get(run.run_id);
    const space = run.manifest?.space;
    const u = outcome?.utility;
    const scores = outcome?.utilityScores ?? null;
    return {
      run_id: run.run_id,
      cell_id: run.cell_id,
      cell: run.cell,
      status: run.status,
      no_canary: run.manifest?.no_canary ?? false,
      reason: run.reason,
      failure: run.failure,
      candidate_space: space ? { kind: space.kind, size: space.size, ceiling: exposureCeiling(space.size) } : null,
      phases: outcome?.phases ?? [],
      utility: u
        ? {
            ...u,
            delta: u.base_loss !== null && u.final_loss !== null ? u.final_loss - u.base_loss : null,
            ...(scores
              ? { metrics: metricSummaries([{ run_id: run.run_id, scores }], `run|${run.run_id}`, stat) }
              : {}),
          }
        : null,
      provenance: { controller: brief(run.manifest?.provenance ?? null), trainer: brief(outcome?.provenance ?? null) },
      numerics: outcome?.numerics ?? null,
    };
  });
}

/**
 * The full cell of a run less its seed axes (and axes that do not apply to it): utility is a
 * property of the run, so every axis, the dose included, tells cells apart.
 */
function runCell(cell: Cell, roles: AxisRoles): Cell {
  const out: Cell = {};
  for (const key of Object.keys(cell).sort()) {
    if (roles.seedAxes.includes(key) || cell[key] === null || cell[key] === undefined) continue;
    out[key] = cell[key];
  }
  return out;
}

/**
 * Utility loss before and after fine-tuning, median over the runs of each full cell (seeds pooled);
 * generation metrics, when some run of the cell has them, pooled over its runs' rows.
 */
function utilityGroups(
  runs: RunReport[],
  outcomes: ReadonlyMap<string, RunOutcome>,
  roles: AxisRoles,
  axes: readonly Axis[],
  labelAxes: ReadonlySet<string> | undefined,
  stat: Stat,
): UtilityGroup[] {
  const groups = new Map<string, { cell: Cell; no_canary: boolean; runs: RunReport[] }>();
  for (const r of runs) {
    if (!r.utility) continue;
    const cell = runCell(r.cell, roles);
    const key = valueKey(cell);
    const g = groups.get(key);
    if (g) g.runs.push(r);
    else groups.set(key, { cell, no_canary: r.no_canary, runs: [r] });
  }
  return [...groups.values()]
    .map((g) => {
      const scored = g.runs.flatMap((r) => {
        const scores = outcomes.get(r.run_id)?.utilityScores;
        return scores ? [{ run_id: r.run_id, scores }] : [];
      });
      return {
        cell: g.cell,
        label: cellLabel(g.cell, labelAxes),
        no_canary: g.no_canary,
        n_runs: g.runs.length,
        base_loss: medianOrNull(g.runs.map((r) => r.utility?.base_loss ?? null)),
        final_loss: medianOrNull(g.runs.map((r) => r.utility?.final_loss ?? null)),
        delta: medianOrNull(g.runs.map((r) => r.utility?.delta ?? null)),
        ...(scored.length > 0 ? { metrics: metricSummaries(scored, `group|${valueKey(g.cell)}`, stat) } : {}),
      };
    })
    .sort(
      (a, b) =>
        Number(b.no_canary) - Number(a.no_canary) ||
        compareCells(axes, a.cell, b.cell) ||
        a.label.localeCompare(b.label),
    );
}

/** A dataset-backed task's rows: where they came from (repository, commit, file hashes) and which runs read them. */
export interface DatasetSource extends DatasetProvenance {
  task: string;
  runs: string[];
}

/** One entry per (task, dataset provenance) among the audit's manifests, in run order. */
function datasetSources(audit: LoadedAudit): DatasetSource[] {
  const byKey = new Map<string, DatasetSource>();
  for (const run of audit.runs) {
    const d = run.manifest?.dataset;
    if (!run.manifest || !d) continue;
    const key = `${run.manifest.task}\u0000${canonicalJson(d)}`;
    const entry = byKey.get(key);
    if (entry) entry.runs.push(run.run_id);
    else byKey.set(key, { task: run.manifest.task, ...structuredClone(d), runs: [run.run_id] });
  }
  return [...byKey.values()];
}

/** Settings of the privacy readouts. */
export const PRIVACY_DELTA = 1e-5;
export const PRIVACY_FPRS = [0.01, 0.001] as const;

/** Membership readouts of one run: inserted (members) vs held-out canaries, scored by exposure. */
export interface PrivacyReadout {
  run_id: string;
  cell_id: string;
  probe_kind: string;
  inclusion: 'randomized' | 'fixed';
  n_in: number;
  n_out: number;
  auc: Interval | null;
  /** Area under the ROC convex hull (jax_privacy's `attack_auroc`): randomizing between thresholds allowed. */
  auc_hull: number | null;
  tpr_at_fpr: TprAtFpr[];
  epsilon: {
    delta: number;
    confidence: number;
    clopper_pearson: EpsilonBound | null;
    one_run: OneRunBound | null;
    /** Why the one-run bound is not given (inclusion not randomized); null when it is. */
    one_run_refused: string | null;
    /** Gaussian-DP bound (Bonferroni over the ROC hull's thresholds). */
    gdp: GdpBound | null;
    /** f-DP one-run bound (Mahloujifar et al.), same refusal as `one_run`. */
    fdp_one_run: FdpOneRunBound | null;
    /** How the Clopper–Pearson and both one-run bounds chose their threshold: `bonferroni`, `split(…)`, `multisplit(…)` (GDP: always bonferroni). */
    threshold_strategy: string;
  };
}

/**
 * Per finished run with inserted and held-out canaries: AUC, TPR at low FPR, ε lower bounds (final
 * phase). Only for an audit whose manifests randomize inclusion (empty otherwise).
 */
export function privacyReadouts(
  audit: LoadedAudit,
  observations: readonly Observation[],
  confidence: number,
  strategy: ThresholdStrategy = { kind: 'bonferroni' },
): PrivacyReadout[] {
  if (!audit.runs.some((r) => r.manifest?.inclusion === 'randomized')) return [];
  return membershipPools(audit, observations).map(({ run, probe_kind: kind, randomized, scored }) => {
    const nIn = scored.filter((x) => x.member).length;
    return {
      run_id: run.run_id,
      cell_id: run.cell_id,
      probe_kind: kind,
      inclusion: randomized ? 'randomized' : 'fixed',
      n_in: nIn,
      n_out: scored.length - nIn,
      auc: membershipAuc(scored, confidence),
      auc_hull: hullAuc(scored),
      tpr_at_fpr: PRIVACY_FPRS.flatMap((f) => tprAtFpr(scored, f, confidence) ?? []),
      epsilon: {
        delta: PRIVACY_DELTA,
        confidence,
        clopper_pearson: clopperPearsonEpsilon(scored, PRIVACY_DELTA, confidence, strategy),
        one_run: randomized ? oneRunBound(scored, PRIVACY_DELTA, confidence, strategy) : null,
        one_run_refused: randomized
          ? null
          : 'inclusion was not randomized (grid canaries.inclusion: randomized draws each canary by a fair coin); the one-run bound holds only then',
        gdp: gdpEpsilon(scored, PRIVACY_DELTA, confidence),
        fdp_one_run: randomized ? fdpOneRunBound(scored, PRIVACY_DELTA, confidence, strategy) : null,
        threshold_strategy: strategyLabel(strategy),
      },
    };
  });
}

/** The distinct floating-point paths of the audit's finished runs, most runs first. */
function numericsPaths(runs: RunReport[]): NumericsPath[] {
  const byKey = new Map<string, NumericsPath>();
  for (const r of runs) {
    if (!r.numerics) continue;
    const key = canonicalJson(r.numerics);
    const entry = byKey.get(key);
    if (entry) entry.runs.push(r.run_id);
    else byKey.set(key, { ...structuredClone(r.numerics), runs: [r.run_id] });
  }
  return [...byKey.values()].sort((a, b) => b.runs.length - a.runs.length);
}

/** `Intel Xeon …, AVX512, 1 thread, cpu, float32` */
export function numericsLabel(n: Numerics): string {
  const gpu =
    n.gpu_count > 0
      ? `, ${n.gpu_count}× ${n.gpu_model ?? 'GPU'} (driver ${n.driver_version ?? '?'}, CUDA ${n.cuda_version ?? '?'}, cuDNN ${n.cudnn_version ?? '?'})`
      : '';
  const det = n.deterministic_algorithms ? ', deterministic algorithms' : '';
  return `${n.cpu_model ?? 'unknown CPU'}, capability ${n.cpu_capability ?? '?'}, ${n.threads} thread${n.threads === 1 ? '' : 's'}, ${n.device}${gpu}, ${n.dtype}${det}`;
}

/**
 * Runs that took different floating-point paths: every figure of the report compares runs across
 * the audit's cells (the exposure-vs-dose plot, the paired comparisons), so a second path means
 * some figure compares runs whose numbers would differ even under the same manifest.
 */
function numericsWarnings(paths: NumericsPath[], runs: RunReport[]): ReportWarning[] {
  const unknown = runs.filter((r) => r.status === 'finished' && !r.numerics).map((r) => r.run_id);
  if (paths.length < 2 && (paths.length === 0 || unknown.length === 0)) return [];
  const parts = paths.map((p) => `${numericsLabel(p)} (${p.runs.length} run${p.runs.length === 1 ? '' : 's'})`);
  if (unknown.length > 0) parts.push(`not recorded (${unknown.length} run${unknown.length === 1 ? '' : 's'})`);
  return [
    {
      kind: 'mixed_numerics',
      message: `runs compared in this report's figures took ${parts.length} floating-point paths: ${parts.join('; ')}. The same manifest gives different exposures on different paths; a difference between such runs may be numerics, not the axis.`,
      runs: [...paths.flatMap((p) => p.runs), ...unknown],
    },
  ];
}

/** One task whose runs read different rows (the dataset moved between plans, or another file). */
function datasetWarnings(datasets: DatasetSource[]): ReportWarning[] {
  const tasks = [...new Set(datasets.map((d) => d.task))];
  return tasks
    .map((task) => datasets.filter((d) => d.task === task))
    .filter((same) => same.length > 1)
    .map((same) => ({
      kind: 'mixed_dataset_versions' as const,
      message: `task ${same[0]?.task}: its runs read ${same.length} different versions of the dataset (${same.map((d) => (d.sha ?? d.path ?? '?').slice(0, 12)).join(', ')}); compare them only with that in mind.`,
      runs: same.flatMap((d) => d.runs),
    }));
}

/** Failed and missing runs, groups without a control arm, mixed or changed code versions. */
function summaryWarnings(input: SummaryInput, runs: RunReport[], roles: AxisRoles): ReportWarning[] {
  const warnings: ReportWarning[] = [];
  const failed = runs.filter((r) => r.status === 'failed');
  const missing = runs.filter((r) => r.status === 'missing');
  if (failed.length > 0) {
    // The same accounting as status and the dashboard: a run stopped by a cancel is cancelled.
    const cancelled = failed.filter((r) => r.failure?.kind === 'cancelled').length;
    const forGood = failed.length - cancelled;
    const what = [forGood > 0 ? `${forGood} failed for good` : null, cancelled > 0 ? `${cancelled} cancelled` : null]
      .filter(Boolean)
      .join(', ');
    warnings.push({
      kind: 'failed_runs',
      message: `${failed.length} of ${runs.length} runs did not finish (${what}); their cells are reported from the remaining runs (n shows what is left).`,
      runs: failed.map((r) => r.run_id),
    });
  }
  if (missing.length > 0) {
    warnings.push({
      kind: 'missing_runs',
      message: `${missing.length} of ${runs.length} runs have no result yet; the report covers finished runs only.`,
      runs: missing.map((r) => r.run_id),
    });
  }
  const alone = input.groups.filter(
    (g) => g.phase === 'final' && !g.controls.held_out && !g.controls.base && !g.controls.no_canary,
  );
  if (alone.length > 0) {
    warnings.push({
      kind: 'no_control',
      message: `${alone.length} group(s) have no control arm (no held-out canaries, no base evaluation, no no-canary run): their exposure cannot be told apart from the prior.`,
      runs: [
        ...new Set(
          alone.flatMap((g) =>
            runs.filter((r) => valueKey(groupCell(r.cell, roles)) === valueKey(g.cell)).map((r) => r.run_id),
          ),
        ),
      ],
    });
  }
  const oneRunGroups = input.groups.filter(
    (g) => g.phase === 'final' && g.cohort === 'focal' && g.inserted.n_runs === 1,
  );
  const oneRunPairs = input.paired.filter((p) => p.phase === 'final' && p.cohort !== 'held_out' && p.n_run_pairs === 1);
  if (oneRunGroups.length > 0 || oneRunPairs.length > 0) {
    const parts = [
      oneRunGroups.length > 0 ? `${oneRunGroups.length} focal figure(s)` : null,
      oneRunPairs.length > 0
        ? `${oneRunPairs.length} paired comparison(s) (${oneRunPairs
            .slice(0, 4)
            .map(
              (p) =>
                `${p.axis} ${formatValue(p.from)} → ${formatValue(p.to)}${p.label && p.label !== '(all runs)' ? ` at ${p.label}` : ''}`,
            )
            .join('; ')}${oneRunPairs.length > 4 ? '; …' : ''})`
        : null,
    ].filter(Boolean);
    warnings.push({
      kind: 'single_run',
      message: `${parts.join(' and ')} rest on one run per arm — one run: a rerun can fall outside this interval. Their intervals cover canary sampling only; another seed or another floating-point path can move them (add seeds to measure it).`,
      runs: [...new Set(oneRunGroups.flatMap((g) => g.inserted.run_medians.map((r) => r.run_id)))],
    });
  }
  const twoRunGroups = input.groups.filter(
    (g) => g.phase === 'final' && g.cohort === 'focal' && g.inserted.n_runs === 2,
  );
  const twoRunPairs = input.paired.filter((p) => p.phase === 'final' && p.cohort !== 'held_out' && p.n_run_pairs === 2);
  if (twoRunGroups.length > 0 || twoRunPairs.length > 0) {
    const parts = [
      twoRunGroups.length > 0 ? `${twoRunGroups.length} focal figure(s)` : null,
      twoRunPairs.length > 0 ? `${twoRunPairs.length} paired comparison(s)` : null,
    ].filter(Boolean);
    warnings.push({
      kind: 'two_runs',
      message: `${parts.join(' and ')} rest on 2 runs per arm: in simulated audits such 95% intervals covered as little as 92% (docs/metrics.md, coverage), so they may be too narrow; each is marked where it is printed. With a third seed per cell most such cells reach 93–97%.`,
      runs: [...new Set(twoRunGroups.flatMap((g) => g.inserted.run_medians.map((r) => r.run_id)))],
    });
  }
  warnings.push(
    ...provenanceWarnings(
      input.audit.runs.map((r) => ({
        run_id: r.run_id,
        controller: r.manifest?.provenance ?? null,
        trainer: input.outcomes.get(r.run_id)?.provenance ?? null,
      })),
    ),
  );
  return warnings;
}

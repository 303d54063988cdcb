import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { GRID_FILE } from '../layout.js';
import { readSequentialRecord } from '../contracts/index.js';
import { DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, type MedianMethod } from '../metrics/bootstrap.js';
import { aggregateGroups } from '../metrics/aggregate.js';
import { DEFAULT_AXIS_ROLES, varyingAxes, type AxisRoles } from '../metrics/cells.js';
import type { Observation } from '../metrics/observation.js';
import { pairedComparisons } from '../metrics/paired.js';
import type { RunMeta } from '../metrics/space-check.js';
import { controllerStamp, finishProvenance } from '../provenance/stamp.js';
import type { CsvRunInfo } from './csv.js';
import type { ReportFormat } from './formats.js';
import { loadAudit } from './load-audit.js';
import { observeRun, type ObserveHooks, type RunOutcome } from './observe.js';
import { controlWarnings } from './control-checks.js';
import { headline } from './findings.js';
import { cellAucs, largestEpsilon, membershipPools } from './privacy-max.js';
import { extrapolationGroups } from './extrapolation.js';
import { THRESHOLD_STRATEGIES, thresholdStrategy } from '../metrics/privacy-fdp.js';
import { buildSummary, PRIVACY_DELTA, PRIVACY_FPRS, privacyReadouts, type ReportSummary } from './summary.js';
import { canaryDesigns } from './canary-designs.js';
import { utilityHeadlines } from './utility.js';

export interface WriteReportOptions {
  auditDir: string;
  /** Default `<auditDir>/report`. */
  outDir?: string;
  /** Default: all four. */
  formats?: ReportFormat[];
  /** Bootstrap seed. Default 0. */
  seed?: number;
  /** Bootstrap resamples per interval. Default 2000. */
  resamples?: number;
  /** Two-sided level of every interval. Default 0.95. */
  confidence?: number;
  /** How resample medians are found (same numbers): quickselect (default) or sorting (reference, for benchmarks). */
  median?: MedianMethod;
  /** Which axes are seed repetitions and which one holds the dose. Default seed / dose. */
  roles?: AxisRoles;
  /** Test seam: replaces the score-file reader. */
  hooks?: ObserveHooks;
  /** Equivalence margin of the verdicts, bits. Default: the audit grid's `analysis.margin_bits`, else 1. */
  marginBits?: number;
  /**
   * Sequential replicates: report the verdicts read at each comparison's stopping look
   * (sequential.json). Default true; false reads the runs as a fixed grid would (a look itself).
   */
  sequential?: boolean;
  /** How the Clopper–Pearson and both one-run ε bounds pick their threshold (split seeds: `seed`; GDP: always bonferroni). Default: the grid's analysis.threshold_strategy, else bonferroni. */
  thresholdStrategy?: (typeof THRESHOLD_STRATEGIES)[number];
  /** Extrapolated exposure for probes of sampled spaces. Default: the grid's analysis.extrapolate, else false. */
  extrapolate?: boolean;
}

export interface WriteReportResult {
  files: string[];
  summaryPath?: string;
  /** Run and observation counts (whatever formats were written). */
  counts: ReportSummary['counts'];
  /** Warnings the report carries (code versions, failed or missing runs, missing controls). */
  warnings: ReportSummary['warnings'];
  /** The finding with the largest effect, in one sentence (null when no run has focal canaries). */
  headline: string | null;
  /** One plain sentence per declared comparison with its verdict (report/verdicts.ts). */
  verdicts: string[];
  /** The same verdicts as fields, as summary.json's `verdicts` carries them. */
  comparisons: NonNullable<ReportSummary['verdicts']>;
}

/** The report settings the audit's grid declares under `analysis` (validated when it was planned); empty when none. */
async function gridAnalysis(auditDir: string): Promise<{
  margin_bits?: number;
  threshold_strategy?: (typeof THRESHOLD_STRATEGIES)[number];
  extrapolate?: boolean;
}> {
  let text: string;
  try {
    text = await readFile(join(auditDir, GRID_FILE), 'utf8');
  } catch {
    return {};
  }
  const doc = parseYaml(text) as { analysis?: Record<string, unknown> } | null;
  const a = doc?.analysis ?? {};
  const m = a.margin_bits;
  const t = a.threshold_strategy;
  return {
    ...(typeof m === 'number' && m > 0 ? { margin_bits: m } : {}),
    ...(typeof t === 'string' && (THRESHOLD_STRATEGIES as readonly string[]).includes(t)
      ? { threshold_strategy: t as (typeof THRESHOLD_STRATEGIES)[number] }
      : {}),
    ...(typeof a.extrapolate === 'boolean' ? { extrapolate: a.extrapolate } : {}),
  };
}

export interface ComputedReport {
  summary: ReportSummary;
  observations: Observation[];
  csvRuns: Map<string, CsvRunInfo>;
}

/** Everything but the writing: load, observe (streamed), aggregate, summarise. */
export async function computeReport(options: WriteReportOptions): Promise<ComputedReport> {
  const atStart = controllerStamp();
  const roles = options.roles ?? DEFAULT_AXIS_ROLES;
  const settings = {
    seed: options.seed ?? 0,
    resamples: options.resamples ?? DEFAULT_RESAMPLES,
    confidence: options.confidence ?? DEFAULT_CONFIDENCE,
    seed_axes: [...roles.seedAxes],
    dose_axis: roles.doseAxis,
    main_phase: 'final' as const,
    default_decode: 'prefill' as const,
  };
  const audit = await loadAudit(options.auditDir);
  const analysis = await gridAnalysis(options.auditDir);
  const strategyName = options.thresholdStrategy ?? analysis.threshold_strategy ?? 'bonferroni';
  const extrapolate = options.extrapolate ?? analysis.extrapolate ?? false;
  const outcomes = new Map<string, RunOutcome>();
  const observations: Observation[] = [];
  const metas: RunMeta[] = [];
  for (const run of audit.runs) {
    if (run.status !== 'finished') continue;
    const outcome = await observeRun(run, { ...options.hooks, extrapolate });
    for (const o of outcome.observations) observations.push(o);
    // Keep the run's summary facts, not its observation list twice.
    outcomes.set(run.run_id, { ...outcome, observations: [] });
    metas.push({
      run_id: run.run_id,
      cell: run.cell,
      source: run.resultPath,
      no_canary: run.manifest?.no_canary ?? false,
    });
  }
  const stat = {
    seed: settings.seed,
    resamples: settings.resamples,
    confidence: settings.confidence,
    ...(options.median ? { median: options.median } : {}),
  };
  // Labels name the axes that vary over the whole grid (failed and missing runs included).
  const labelAxes = varyingAxes(audit.runs.map((r) => r.cell));
  // Designs together: a run's canaries are grouped by their design, which then names the groups.
  if (observations.some((o) => o.design !== undefined)) labelAxes.add('design');
  const groups = aggregateGroups(metas, observations, { ...stat, roles, axes: audit.axes, labelAxes });
  const paired = pairedComparisons(metas, observations, { ...stat, roles, axes: audit.axes, labelAxes });
  // The utility headline only where some run measured task utility beyond loss: loss-only audits
  // keep the report they had.
  const finished = audit.runs.filter((r) => outcomes.has(r.run_id));
  const utilityHeadline = finished.some((r) => outcomes.get(r.run_id)?.utilityScores)
    ? utilityHeadlines(
        finished.map((r) => {
          const o = outcomes.get(r.run_id) as RunOutcome;
          return {
            run_id: r.run_id,
            task: r.manifest?.task ?? '—',
            scores: o.utilityScores,
            base_loss: o.utility.base_loss,
            final_loss: o.utility.final_loss,
          };
        }),
        observations,
        stat,
        groups,
      )
    : undefined;
  const summary = buildSummary({
    privacy: privacyReadouts(audit, observations, settings.confidence, thresholdStrategy(strategyName, settings.seed)),
    // Only where the privacy readouts exist (some manifest randomizes inclusion).
    epsilonMax: audit.runs.some((r) => r.manifest?.inclusion === 'randomized')
      ? largestEpsilon(
          membershipPools(audit, observations),
          PRIVACY_DELTA,
          settings.confidence,
          thresholdStrategy(strategyName, settings.seed),
        )
      : [],
    privacyAuc: audit.runs.some((r) => r.manifest?.inclusion === 'randomized')
      ? cellAucs(membershipPools(audit, observations), {
          confidence: settings.confidence,
          seed: settings.seed,
          resamples: settings.resamples,
          seedAxes: settings.seed_axes,
          labelAxes,
        })
      : [],
    extrapolation: extrapolate
      ? extrapolationGroups(audit, observations, { seedAxes: settings.seed_axes, labelAxes })
      : [],
    controlWarnings: controlWarnings({
      audit,
      observations,
      outcomes,
      seedAxes: settings.seed_axes,
      confidence: settings.confidence,
      delta: PRIVACY_DELTA,
    }),
    audit,
    labelAxes,
    outcomes,
    observations: observations.length,
    groups,
    paired,
    settings,
    provenance: finishProvenance(atStart),
    ...(utilityHeadline ? { utilityHeadline } : {}),
    marginBits: options.marginBits ?? analysis.margin_bits ?? undefined,
    sequential: options.sequential === false ? null : await readSequentialRecord(options.auditDir),
    canaryDesigns: canaryDesigns({
      audit,
      groups,
      observations,
      confidence: settings.confidence,
      resamples: settings.resamples,
      seed: settings.seed,
      delta: PRIVACY_DELTA,
      fprs: PRIVACY_FPRS,
      strategy: thresholdStrategy(strategyName, settings.seed),
      doseAxis: settings.dose_axis,
    }),
  });
  // The finding `run` prints, in summary.json too (report/findings.ts reads the summary built above).
  summary.headline = headline(summary);
  const csvRuns = new Map(audit.runs.map((r) => [r.run_id, { audit_id: audit.id, cell_id: r.cell_id, cell: r.cell }]));
  return { summary, observations, csvRuns };
}

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { GRID_FILE } from '../layout.js';
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
import { largestEpsilon, membershipPools } from './privacy-max.js';
import { thresholdStrategy, type THRESHOLD_STRATEGIES } from '../metrics/privacy-fdp.js';
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
  /** How the f-DP one-run ε bound picks its threshold (split seeds: `seed`). Default bonferroni. */
  thresholdStrategy?: (typeof THRESHOLD_STRATEGIES)[number];
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
}

/** The margin the audit's grid declares (`analysis.margin_bits`; validated when it was planned); null when none. */
async function gridMargin(auditDir: string): Promise<number | null> {
  let text: string;
  try {
    text = await readFile(join(auditDir, GRID_FILE), 'utf8');
  } catch {
    return null;
  }
  const doc = parseYaml(text) as { analysis?: { margin_bits?: unknown } } | null;
  const m = doc?.analysis?.margin_bits;
  return typeof m === 'number' && m > 0 ? m : null;
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
  const outcomes = new Map<string, RunOutcome>();
  const observations: Observation[] = [];
  const metas: RunMeta[] = [];
  for (const run of audit.runs) {
    if (run.status !== 'finished') continue;
    const outcome = await observeRun(run, options.hooks);
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
    privacy: privacyReadouts(
      audit,
      observations,
      settings.confidence,
      thresholdStrategy(options.thresholdStrategy ?? 'bonferroni', settings.seed),
    ),
    // Only where the privacy readouts exist (some manifest randomizes inclusion).
    epsilonMax: audit.runs.some((r) => r.manifest?.inclusion === 'randomized')
      ? largestEpsilon(
          membershipPools(audit, observations),
          PRIVACY_DELTA,
          settings.confidence,
          thresholdStrategy(options.thresholdStrategy ?? 'bonferroni', settings.seed),
        )
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
    marginBits: options.marginBits ?? (await gridMargin(options.auditDir)) ?? undefined,
    canaryDesigns: canaryDesigns({
      audit,
      groups,
      observations,
      confidence: settings.confidence,
      resamples: settings.resamples,
      seed: settings.seed,
      delta: PRIVACY_DELTA,
      fprs: PRIVACY_FPRS,
      strategy: thresholdStrategy(options.thresholdStrategy ?? 'bonferroni', settings.seed),
    }),
  });
  // The finding `run` prints, in summary.json too (report/findings.ts reads the summary built above).
  summary.headline = headline(summary);
  const csvRuns = new Map(audit.runs.map((r) => [r.run_id, { audit_id: audit.id, cell_id: r.cell_id, cell: r.cell }]));
  return { summary, observations, csvRuns };
}

import { join, resolve } from 'node:path';
import { UserInputError, quoteValue } from '../errors.js';
import { StagedFiles } from '../fs/staged.js';
import { explainWriteError } from '../fs/write-error.js';
import { reportDirOf } from '../layout.js';
import { log } from '../log.js';
import { aggregateGroups } from '../metrics/aggregate.js';
import { DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, type MedianMethod } from '../metrics/bootstrap.js';
import { DEFAULT_AXIS_ROLES, varyingAxes, type AxisRoles } from '../metrics/cells.js';
import type { Observation } from '../metrics/observation.js';
import { pairedComparisons } from '../metrics/paired.js';
import type { RunMeta } from '../metrics/space-check.js';
import { controllerStamp, finishProvenance } from '../provenance/stamp.js';
import { renderCsv, renderDataPackage, renderUtilityCsv, utilityResource, type CsvRunInfo } from './csv.js';
import { buildDocument } from './document.js';
import { renderHtml, type RenderedPlot } from './html.js';
import { loadAudit } from './load-audit.js';
import { renderMarkdown } from './markdown.js';
import { observeRun, type ObserveHooks, type RunOutcome } from './observe.js';
import { buildPlots, renderSvg } from './plots.js';
import { buildSummary, privacyReadouts, type ReportSummary } from './summary.js';
import { utilityHeadlines } from './utility.js';

/**
 * `writeReport`: compute every metric of an audit from its stored artifacts and write the report
 * files. Runs are read one after another and score files one at a time; failed and missing runs
 * are listed, not fatal; damaged artifacts are errors that name the file.
 */
export type ReportFormat = 'md' | 'csv' | 'json' | 'html';
export const REPORT_FORMATS: readonly ReportFormat[] = ['md', 'csv', 'json', 'html'];

/** File names inside the output folder. */
export const REPORT_FILES = { md: 'report.md', csv: 'report.csv', json: 'summary.json', html: 'report.html', datapackage: 'datapackage.json', utilityCsv: 'utility.csv' } as const;

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
}

export interface WriteReportResult {
  files: string[];
  summaryPath?: string;
  /** Run and observation counts (whatever formats were written). */
  counts: ReportSummary['counts'];
  /** Warnings the report carries (code versions, failed or missing runs, missing controls). */
  warnings: ReportSummary['warnings'];
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
    metas.push({ run_id: run.run_id, cell: run.cell, source: run.resultPath, no_canary: run.manifest?.no_canary ?? false });
  }
  const stat = { seed: settings.seed, resamples: settings.resamples, confidence: settings.confidence, ...(options.median ? { median: options.median } : {}) };
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
          return { run_id: r.run_id, task: r.manifest?.task ?? '—', scores: o.utilityScores, base_loss: o.utility.base_loss, final_loss: o.utility.final_loss };
        }),
        observations,
        stat,
      )
    : undefined;
  const summary = buildSummary({
    privacy: privacyReadouts(audit, observations, settings.confidence),
    audit,
    labelAxes,
    outcomes,
    observations: observations.length,
    groups,
    paired,
    settings,
    provenance: finishProvenance(atStart),
    ...(utilityHeadline ? { utilityHeadline } : {}),
  });
  const csvRuns = new Map(audit.runs.map((r) => [r.run_id, { audit_id: audit.id, cell_id: r.cell_id, cell: r.cell }]));
  return { summary, observations, csvRuns };
}

export function parseFormats(text: string): ReportFormat[] {
  const formats = text
    .split(',')
    .map((f) => f.trim())
    .filter((f) => f !== '');
  for (const f of formats) {
    if (!REPORT_FORMATS.includes(f as ReportFormat)) {
      throw new UserInputError(`unknown report format ${quoteValue(f)}; use a comma-separated list of ${REPORT_FORMATS.join(', ')}`, { field: '--format', code: 'E_BAD_FLAG' });
    }
  }
  if (formats.length === 0) throw new UserInputError(`no report format given; use a comma-separated list of ${REPORT_FORMATS.join(', ')}`, { field: '--format', code: 'E_BAD_FLAG' });
  return [...new Set(formats)] as ReportFormat[];
}

export async function writeReport(options: WriteReportOptions): Promise<WriteReportResult> {
  const auditDir = resolve(options.auditDir);
  const outDir = resolve(options.outDir ?? reportDirOf(auditDir));
  const formats = options.formats ?? [...REPORT_FORMATS];
  const { summary, observations, csvRuns } = await computeReport({ ...options, auditDir });
  // All or nothing: every file is staged first, so a full disk leaves the previous report whole.
  let stage: StagedFiles | null = null;
  try {
    stage = await StagedFiles.open(outDir);
    const written = await stageReport(stage, outDir, formats, summary, observations, csvRuns);
    await stage.commit([join(outDir, REPORT_FILES.html)]);
    log.debug({ audit: summary.audit.id, out: outDir, files: written.files.length, runs: summary.counts }, 'report written');
    const base = { files: written.files, counts: summary.counts, warnings: summary.warnings };
    return written.summaryPath === undefined ? base : { ...base, summaryPath: written.summaryPath };
  } catch (error) {
    await stage?.abort().catch(() => undefined);
    throw explainWriteError(error, outDir, 'write the report to') ?? error;
  }
}

async function stageReport(
  stage: StagedFiles,
  outDir: string,
  formats: ReportFormat[],
  summary: ReportSummary,
  observations: Awaited<ReturnType<typeof computeReport>>['observations'],
  csvRuns: Awaited<ReturnType<typeof computeReport>>['csvRuns'],
): Promise<{ files: string[]; summaryPath?: string }> {
  const files: string[] = [];
  let summaryPath: string | undefined;

  if (formats.includes('csv')) {
    const path = join(outDir, REPORT_FILES.csv);
    await stage.write(path, renderCsv(summary.audit.axes, csvRuns, observations));
    // The column types travel with the table: codes stay strings in any loader that reads them.
    const packagePath = join(outDir, REPORT_FILES.datapackage);
    const datapackage = renderDataPackage(summary.audit.id, summary.audit.axes);
    // A task with metrics beyond the loss (accuracy, exact match, F1) gets its own tidy table.
    const withTaskMetrics = summary.runs.some((r) => (r.utility?.metrics?.length ?? 0) > 0);
    if (withTaskMetrics) {
      const utilityPath = join(outDir, REPORT_FILES.utilityCsv);
      await stage.write(utilityPath, renderUtilityCsv(summary.audit.id, summary.audit.axes, summary.runs));
      (datapackage.resources as unknown[]).push(utilityResource(summary.audit.axes));
      files.push(utilityPath);
    }
    await stage.json(packagePath, datapackage);
    files.push(path, packagePath);
  }
  if (formats.includes('json')) {
    summaryPath = join(outDir, REPORT_FILES.json);
    await stage.json(summaryPath, summary);
    files.push(summaryPath);
  }
  const doc = formats.includes('md') || formats.includes('html') ? buildDocument(summary) : null;
  if (doc && formats.includes('md')) {
    const path = join(outDir, REPORT_FILES.md);
    await stage.write(path, renderMarkdown(doc));
    files.push(path);
  }
  if (doc && formats.includes('html')) {
    const rendered: RenderedPlot[] = [];
    for (const plot of buildPlots(summary)) {
      const svg = await renderSvg(plot.spec);
      rendered.push({ id: plot.id, title: plot.title, svg });
      // Each figure also stands alone (SVG + its Vega-Lite spec) for papers.
      const svgPath = join(outDir, 'plots', `${plot.id}.svg`);
      const specPath = join(outDir, 'plots', `${plot.id}.vl.json`);
      await stage.write(svgPath, svg);
      await stage.json(specPath, plot.spec);
      files.push(svgPath, specPath);
    }
    const path = join(outDir, REPORT_FILES.html);
    await stage.write(path, renderHtml(doc, rendered));
    files.push(path);
  }
  return summaryPath === undefined ? { files } : { files, summaryPath };
}

export type { ReportSummary } from './summary.js';
export { loadAudit } from './load-audit.js';

import { join, resolve } from 'node:path';
import { StagedFiles } from '../fs/staged.js';
import { explainWriteError } from '../fs/write-error.js';
import { reportDirOf } from '../layout.js';
import { log } from '../log.js';
import { computeReport, type WriteReportOptions, type WriteReportResult } from './compute.js';
import { renderCsv, renderDataPackage, renderUtilityCsv, utilityResource } from './csv.js';
import { buildDocument } from './document.js';
import { REPORT_FILES, REPORT_FORMATS, type ReportFormat } from './formats.js';
import { renderHtml, type RenderedPlot } from './html.js';
import { loadAudit } from './load-audit.js';
import { canaryThumbnails, type Thumbnail } from './thumbnails.js';
import { renderMarkdown } from './markdown.js';
import { buildPlots, renderSvg } from './plots.js';
import type { ReportSummary } from './summary.js';

/**
 * `writeReport`: compute every metric of an audit from its stored artifacts and write the report
 * files. Runs are read one after another and score files one at a time; failed and missing runs
 * are listed, not fatal; damaged artifacts are errors that name the file.
 */
export async function writeReport(options: WriteReportOptions): Promise<WriteReportResult> {
  const auditDir = resolve(options.auditDir);
  const outDir = resolve(options.outDir ?? reportDirOf(auditDir));
  const formats = options.formats ?? [...REPORT_FORMATS];
  const { summary, observations, csvRuns } = await computeReport({ ...options, auditDir });
  // An image task's canary screenshots for report.html (none for text tasks).
  const thumbnails = formats.includes('html') ? await canaryThumbnails((await loadAudit(auditDir)).runs) : [];
  // All or nothing: every file is staged first, so a full disk leaves the previous report whole.
  let stage: StagedFiles | null = null;
  try {
    stage = await StagedFiles.open(outDir);
    const written = await stageReport(stage, outDir, formats, summary, observations, csvRuns, thumbnails);
    await stage.commit([join(outDir, REPORT_FILES.html)]);
    log.debug(
      { audit: summary.audit.id, out: outDir, files: written.files.length, runs: summary.counts },
      'report written',
    );
    const base = {
      files: written.files,
      counts: summary.counts,
      warnings: summary.warnings,
      headline: summary.headline ?? null,
      verdicts: (summary.verdicts ?? []).map((v) => v.sentence),
      comparisons: summary.verdicts ?? [],
    };
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
  thumbnails: readonly Thumbnail[],
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
    await stage.write(path, renderHtml(doc, rendered, thumbnails));
    files.push(path);
  }
  return summaryPath === undefined ? { files } : { files, summaryPath };
}

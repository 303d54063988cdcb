/**
 * Reports: an audit's stored artifacts → exposure, recovery and utility figures (`computeReport`)
 * → report.md, report.csv, summary.json and report.html (`writeReport`).
 */
export { computeReport, type ComputedReport, type WriteReportOptions, type WriteReportResult } from './compute.js';
export { writeReport } from './write-report.js';
export { parseFormats, REPORT_FILES, REPORT_FORMATS, type ReportFormat } from './formats.js';
export { THRESHOLD_STRATEGIES } from '../metrics/privacy-fdp.js';
export type { ReportSummary } from './summary.js';
export type { ComparisonVerdict } from './verdicts.js';
export { loadAudit } from './load-audit.js';
export { findings, headline, type Finding } from './findings.js';
export { CONTROL_WARNING_KINDS, type ControlWarningKind, type ReportWarning } from './provenance-check.js';

import { UserInputError, quoteValue } from '../errors.js';

/** The report's formats, and the files each writes. */
export type ReportFormat = 'md' | 'csv' | 'json' | 'html';
export const REPORT_FORMATS: readonly ReportFormat[] = ['md', 'csv', 'json', 'html'];

/** File names inside the output folder. */
export const REPORT_FILES = {
  md: 'report.md',
  csv: 'report.csv',
  json: 'summary.json',
  html: 'report.html',
  datapackage: 'datapackage.json',
  utilityCsv: 'utility.csv',
} as const;

export function parseFormats(text: string): ReportFormat[] {
  const formats = text
    .split(',')
    .map((f) => f.trim().toLowerCase())
    .filter((f) => f !== '');
  for (const f of formats) {
    if (!REPORT_FORMATS.includes(f as ReportFormat)) {
      throw new UserInputError(
        `unknown report format ${quoteValue(f)}; use a comma-separated list of ${REPORT_FORMATS.join(', ')}`,
        { field: '--format', code: 'E_BAD_FLAG' },
      );
    }
  }
  if (formats.length === 0)
    throw new UserInputError(`no report format given; use a comma-separated list of ${REPORT_FORMATS.join(', ')}`, {
      field: '--format',
      code: 'E_BAD_FLAG',
    });
  return [...new Set(formats)] as ReportFormat[];
}

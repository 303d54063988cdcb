import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { reportDirOf } from '../layout.js';
import { log } from '../log.js';
import type { AuditStatus } from '../queue/index.js';
// From its own module: the report's index loads the charts (vega) and metrics, seconds of start-up for status.
import { REPORT_FILES } from '../report/formats.js';
import type { ComparisonVerdict } from '../report/index.js';

/**
 * The verdicts an audit's written report holds (`<audit>/report/summary.json`, `verdicts`), for
 * `status --json` of a finished audit. Null when the folder has no report; a report that cannot be
 * read is left out with a warning in the log: status describes the queue and must not fail on it.
 */
export async function readReportVerdicts(auditDir: string): Promise<ComparisonVerdict[] | null> {
  const path = join(reportDirOf(auditDir), REPORT_FILES.json);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    log.warn({ path, err: error }, 'report summary unreadable: its verdicts are left out of status');
    return null;
  }
  try {
    const summary = JSON.parse(text) as { verdicts?: unknown };
    return Array.isArray(summary.verdicts) ? (summary.verdicts as ComparisonVerdict[]) : null;
  } catch (error) {
    log.warn({ path, err: error }, 'report summary is not JSON: its verdicts are left out of status');
    return null;
  }
}

/**
 * Finished audits whose folder holds a report get that report's verdicts (`verdicts`, the objects
 * of summary.json); the others are returned as they are. `dirOf` names an audit's folder (the
 * artifact root's audits/<id>, or `--audit DIR`), undefined when it is not on this host.
 */
export async function withReportVerdicts(
  audits: readonly AuditStatus[],
  dirOf: (auditId: string) => string | undefined,
): Promise<(AuditStatus & { verdicts?: ComparisonVerdict[] })[]> {
  return Promise.all(
    audits.map(async (a) => {
      const dir = a.state === 'finished' ? dirOf(a.audit_id) : undefined;
      const verdicts = dir === undefined ? null : await readReportVerdicts(dir);
      return verdicts === null ? a : { ...a, verdicts };
    }),
  );
}

import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { AUDIT_VERSION } from '../contracts/index.js';
import { readJsonFile } from '../fs/index.js';
import { auditIndexPath, auditsRoot } from '../layout.js';
import { cliCommand, pathArg } from './invocation.js';

/**
 * Audits written under an artifact root (audits/<id>/audit.json). `status` compares them with the
 * queue: an audit on disk that Redis does not know was lost with Redis's data (a restart without
 * the append-only file) or purged, and can be submitted again from its folder.
 */
export interface DiskAudit {
  auditId: string;
  name: string;
  dir: string;
}

export async function auditsOnDisk(artifactsDir: string): Promise<DiskAudit[]> {
  const root = auditsRoot(artifactsDir);
  if (!existsSync(root)) return [];
  const found: DiskAudit[] = [];
  for (const id of readdirSync(root).sort()) {
    const dir = join(root, id);
    // Only its id and name, without the schema check of every run entry: a list of 10,000 runs
    // took the schema's compilation and a pass over each entry on every `status` call. Commands
    // that use the runs (submit, run, report) read it through readAuditIndex, validated.
    const index = (await readJsonFile(auditIndexPath(dir)).catch(() => undefined)) as
      | { schema_version?: unknown; id?: unknown; name?: unknown }
      | undefined;
    // Not an audit folder (or a damaged one): status is no place to report it.
    if (index?.schema_version !== AUDIT_VERSION || typeof index.id !== 'string' || typeof index.name !== 'string')
      continue;
    found.push({ auditId: index.id, name: index.name, dir });
  }
  return found;
}

/**
 * Why an audit on disk is not on this Redis, as far as its folder tells, and what brings it back:
 * an audit `canary-audit run` ran has its own private Redis (redis/ in its folder, stopped at the
 * end); any other was queued on another Redis, or this one lost it.
 */
export function notQueuedReason(audit: DiskAudit): string {
  if (existsSync(join(audit.dir, 'redis', 'redis.conf'))) {
    const report = join(audit.dir, 'report', 'report.html');
    return `\`canary-audit run\` ran it on its own private Redis (${join(audit.dir, 'redis')}), not this one${existsSync(report) ? `; its report: ${report}` : ''}; \`${cliCommand()} run ${pathArg(audit.dir)}\` continues it there, \`${cliCommand()} dashboard --audit ${pathArg(audit.dir)}\` shows it`;
  }
  return `it was queued on another Redis, or this one lost it (restarted without its append-only file, or purged); to queue it here: ${cliCommand()} submit ${pathArg(audit.dir)} (finished runs reuse their result.json, interrupted ones resume)`;
}

/** One line per audit on disk that the queue does not hold, and how to get it back. */
export function notQueuedLines(onDisk: DiskAudit[], queued: Set<string>, redacted: string): string[] {
  const missing = onDisk.filter((a) => !queued.has(a.auditId));
  if (missing.length === 0) return [];
  return [
    `${missing.length} audit(s) under the artifact root are not on this Redis (${redacted}):`,
    ...missing.map((a) => `  ${a.auditId} (${a.name}): ${notQueuedReason(a)}`),
  ];
}

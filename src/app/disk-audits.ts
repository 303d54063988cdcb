import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { readAuditIndex } from '../contracts/index.js';
import { auditIndexPath, auditsRoot } from '../layout.js';

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
    try {
      const index = await readAuditIndex(auditIndexPath(dir));
      found.push({ auditId: index.id, name: index.name, dir });
    } catch {
      // Not an audit folder (or a damaged one): status is no place to report it.
    }
  }
  return found;
}

/** One line per audit on disk that the queue does not hold, and how to queue it again. */
export function notQueuedLines(onDisk: DiskAudit[], queued: Set<string>, redacted: string): string[] {
  const missing = onDisk.filter((a) => !queued.has(a.auditId));
  if (missing.length === 0) return [];
  return [
    `${missing.length} audit(s) under the artifact root are not in the queue at ${redacted} (Redis restarted without its append-only file, or purged); submit each again (finished runs reuse their result.json, interrupted ones resume):`,
    ...missing.map((a) => `  ${a.auditId} (${a.name}): canary-audit submit ${a.dir}`),
  ];
}

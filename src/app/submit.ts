import {
  assertRedisReachable,
  extendAudit,
  queueConnection,
  submitAudit,
  type QueueTuning,
  type RedisTarget,
  type SubmitOutcome,
} from '../queue/index.js';
import { loadAuditSource, type AuditSource, type TrackingChoice } from './audit-source.js';
import type { PinChoice } from './pinning.js';
import { readAuditIndex, readSequentialRecord, writeSequentialRecord } from '../contracts/index.js';
import { auditIndexPath } from '../layout.js';
import { progressOf, sequentialOfAudit, startRecord } from './sequential-audit.js';

/**
 * `submit`: a grid (planned and written now) or an audit folder, queued on Redis. Redis is checked
 * first: expanding a large grid is wasted when the queue cannot be reached.
 */
export async function submitSource(
  arg: string,
  artifactsDir: string,
  target: RedisTarget,
  tuning: QueueTuning,
  pinning: PinChoice = {},
  tracking: TrackingChoice = {},
): Promise<{ source: AuditSource; outcome: SubmitOutcome; sequential: boolean }> {
  await assertRedisReachable(target);
  const source = await loadAuditSource(arg, artifactsDir, pinning, tracking);
  const conn = queueConnection(target);
  // Sequential replicates: only the runs the looks took so far (the first look's on a new audit);
  // `run AUDIT --redis URL` reads the looks and submits the next seeds (docs/grid.md).
  const grid = await sequentialOfAudit(source.input.auditDir);
  if (grid) {
    const index = await readAuditIndex(auditIndexPath(source.input.auditDir));
    const record =
      (await readSequentialRecord(source.input.auditDir)) ?? startRecord(grid, index.axes.seed ?? [], index.runs);
    await writeSequentialRecord(source.input.auditDir, record);
    const taken = new Set(record.taken);
    const input = { ...source.input, runs: source.input.runs.filter((r) => taken.has(r.runId)) };
    const outcome = await extendAudit(conn, source.artifactsDir, input, tuning, progressOf(record, null));
    return { source: { ...source, input }, outcome, sequential: true };
  }
  const outcome = await submitAudit(conn, source.artifactsDir, source.input, tuning);
  return { source, outcome, sequential: false };
}

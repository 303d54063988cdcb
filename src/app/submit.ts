import {
  assertRedisReachable,
  queueConnection,
  submitAudit,
  type QueueTuning,
  type RedisTarget,
  type SubmitOutcome,
} from '../queue/index.js';
import { loadAuditSource, type AuditSource, type TrackingChoice } from './audit-source.js';
import type { PinChoice } from './pinning.js';

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
): Promise<{ source: AuditSource; outcome: SubmitOutcome }> {
  await assertRedisReachable(target);
  const source = await loadAuditSource(arg, artifactsDir, pinning, tracking);
  const outcome = await submitAudit(queueConnection(target), source.artifactsDir, source.input, tuning);
  return { source, outcome };
}

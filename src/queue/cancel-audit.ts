import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { UserInputError, quoteValue } from '../errors.js';
import { resolveInsideArtifacts } from '../fs/artifact-path.js';
import { writeFailureRecordIfMissing } from './failure-record.js';
import { openQueues, openRedis, type QueueConnection } from './queues.js';
import { outputDirOf } from '../layout.js';

/**
 * Cancel an audit from any host:
 * 1. set <prefix>:cancelled:<audit_id> (every run checks it when it starts, and while it runs);
 * 2. publish on <prefix>:cancel, so the worker running each of its trainers stops it at once;
 * 3. remove its waiting and delayed runs from the queue, recording each in
 *    <prefix>:cancelled-runs:<audit_id> (and in failure.json when the artifacts are here).
 * Running trainers checkpoint and exit; their jobs fail with kind `cancelled`.
 */
export interface CancelOutcome {
  auditId: string;
  cancelledAt: string;
  removed: string[];
  /** Runs that were running: their workers were told to stop them. */
  stopping: string[];
  /** Runs already completed or failed: left as they are. */
  finished: string[];
}

const REMOVABLE = new Set(['waiting', 'delayed', 'prioritized', 'paused', 'waiting-children']);

export async function cancelAudit(
  conn: QueueConnection,
  auditId: string,
  artifactsDir: string | null,
): Promise<CancelOutcome> {
  const queues = openQueues(conn);
  const client = openRedis(conn);
  try {
    const parent = await queues.audits.getJob(auditId);
    if (!parent) {
      throw new UserInputError(
        `no audit ${quoteValue(auditId)} in the queue at ${conn.redacted}; \`canary-audit status\` lists the audits`,
        {
          code: 'E_NO_AUDIT',
        },
      );
    }
    const now = new Date().toISOString();
    // NX: a second cancel keeps the first time.
    await client.set(conn.keys.cancelled(auditId), now, 'NX');
    const cancelledAt = (await client.get(conn.keys.cancelled(auditId))) ?? now;
    await client.publish(conn.keys.cancelChannel, JSON.stringify({ audit_id: auditId, time: cancelledAt }));

    const outcome: CancelOutcome = { auditId, cancelledAt, removed: [], stopping: [], finished: [] };
    for (const { run_id: runId } of parent.data.runs) {
      const job = await queues.runs.getJob(runId);
      if (!job) {
        // Removed by an earlier cancel (recorded then) or never added.
        continue;
      }
      const state = await job.getState();
      if (REMOVABLE.has(state)) {
        try {
          await job.remove();
        } catch {
          // It became active between getState and remove: its worker got the message.
          outcome.stopping.push(runId);
          continue;
        }
        await client.hset(conn.keys.cancelledRuns(auditId), runId, JSON.stringify({ time: cancelledAt, state }));
        outcome.removed.push(runId);
        if (artifactsDir !== null) await recordRemoved(artifactsDir, job.data.manifest, runId, cancelledAt);
      } else if (state === 'active') {
        outcome.stopping.push(runId);
      } else {
        outcome.finished.push(runId);
      }
    }
    return outcome;
  } finally {
    client.disconnect();
    await queues.close();
  }
}

async function recordRemoved(artifactsDir: string, manifest: string, runId: string, time: string): Promise<void> {
  let runDir: string;
  try {
    runDir = join(resolveInsideArtifacts(artifactsDir, manifest), '..');
  } catch {
    return;
  }
  if (!existsSync(runDir)) return;
  await writeFailureRecordIfMissing(outputDirOf(runDir), {
    run_id: runId,
    kind: 'cancelled',
    message: `removed from the queue by cancel at ${time} before it started`,
    attempts: 0,
    time,
  });
}

/** Wait until none of `runIds` is active any more (their trainers stopped), or the timeout. */
export async function waitStopped(conn: QueueConnection, runIds: string[], timeoutMs: number): Promise<string[]> {
  const queues = openQueues(conn);
  try {
    const deadline = Date.now() + timeoutMs;
    let still = runIds;
    while (still.length > 0 && Date.now() < deadline) {
      const states = await Promise.all(still.map((id) => queues.runs.getJobState(id)));
      still = still.filter((_, i) => states[i] === 'active');
      if (still.length > 0) await new Promise((r) => setTimeout(r, 250));
    }
    return still;
  } finally {
    await queues.close();
  }
}

/** Remove an audit and all its runs from Redis (artifacts on disk stay), so it can be submitted again. */
export async function purgeAudit(conn: QueueConnection, auditId: string): Promise<void> {
  const queues = openQueues(conn);
  const client = openRedis(conn);
  try {
    const parent = await queues.audits.getJob(auditId);
    if (parent) await parent.remove({ removeChildren: true });
    for (const { run_id: runId } of parent?.data.runs ?? []) {
      await queues.runs.remove(runId).catch(() => 0);
    }
    await client.del(conn.keys.cancelled(auditId), conn.keys.cancelledRuns(auditId));
  } finally {
    client.disconnect();
    await queues.close();
  }
}

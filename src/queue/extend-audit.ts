import { CanaryAuditError } from '../errors.js';
import type { AuditReturn, SequentialProgress } from './job-data.js';
import { openQueues, type QueueConnection } from './queues.js';
import { collectStatus } from './status.js';
import { submitAudit, type SubmitAuditInput, type SubmitOutcome } from './submit-audit.js';
import type { QueueTuning } from './tuning.js';

/**
 * Queue the runs of an audit with sequential replicates as its looks take them. The first look is
 * an ordinary flow (`submitAudit`). A later look's runs join the same audit: once the previous
 * look's parent is done (BullMQ runs a parent once, when its last child ends), the parent is
 * replaced by a new one under the same job id that lists every run taken so far and holds the new
 * runs as its children; the finished runs stay in the runs queue (their parent is removed without
 * its children), so `status` and the dashboard read one audit with all its runs.
 *
 * `input.runs` is every run taken so far; runs already in the audit are not queued again.
 */
export async function extendAudit(
  conn: QueueConnection,
  artifactsDir: string,
  input: SubmitAuditInput,
  tuning: Pick<QueueTuning, 'attempts' | 'backoffMs'>,
  sequential: SequentialProgress,
): Promise<SubmitOutcome> {
  const queues = openQueues(conn);
  let submitted: string | undefined;
  let earlier: AuditReturn | undefined;
  let fresh = input.runs;
  try {
    const parent = await queues.audits.getJob(input.auditId);
    if (parent) {
      const listed = new Set(parent.data.runs.map((r) => r.run_id));
      fresh = input.runs.filter((r) => !listed.has(r.runId));
      if (fresh.length === 0) {
        await parent.updateData({ ...parent.data, sequential });
        const [status] = await collectStatus(conn, input.auditId);
        return {
          auditId: input.auditId,
          added: false,
          existingState: status?.state ?? 'queued',
          runs: input.runs.length,
        };
      }
      const state = await parent.getState();
      if (state !== 'completed' && state !== 'failed')
        throw new CanaryAuditError(
          'E_INTERNAL',
          `audit ${input.auditId}: the next look's runs arrived while the previous look is ${state}; wait for it to finish`,
        );
      submitted = parent.data.submitted;
      // The replaced parent's summary (itself merged over the looks before it) carries on.
      if (state === 'completed' && parent.returnvalue) earlier = parent.returnvalue;
      await parent.remove({ removeChildren: false });
    }
  } finally {
    await queues.close();
  }
  return submitAudit(conn, artifactsDir, { ...input, runs: fresh }, tuning, {
    listed: input.runs.map((r) => ({ run_id: r.runId, cell_id: r.cellId })),
    sequential,
    ...(submitted ? { submitted } : {}),
    ...(earlier ? { earlier } : {}),
  });
}

import { existsSync } from 'node:fs';
import type { Job, Processor, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { checkOutputInsideArtifacts, resolveInsideArtifacts } from '../fs/artifact-path.js';
import { log } from '../log.js';
import { kindFromReason, writeFailureRecordIfMissing } from '../queue/failure-record.js';
import { mergeAuditReturns } from '../queue/audit-return.js';
import type { AuditJobData, AuditReturn } from '../queue/job-data.js';
import type { QueueKeys } from '../queue/names.js';
import { jobIdFromKey } from '../queue/queues.js';
import { outputDirOf, runDirOf } from '../layout.js';

/**
 * The audit parent runs once every run has completed, failed for good or been cancelled. It sums up
 * the audit in its return value and makes sure each failed run has a failure.json (a run that
 * stalled too often fails inside BullMQ, where no trainer could write one).
 */
export function createAuditProcessor(ctx: {
  artifactsDir: string;
  keys: QueueKeys;
  redis: Redis;
  runs: Queue;
}): Processor<AuditJobData, AuditReturn> {
  return async (job: Job<AuditJobData, AuditReturn>): Promise<AuditReturn> => {
    const values = await job.getChildrenValues<{ run_id?: string }>();
    const failures = await job.getIgnoredChildrenFailures();
    const cancelledRuns = await ctx.redis.hgetall(ctx.keys.cancelledRuns(job.data.audit_id));
    const ended = Object.entries(failures).map(([key, reason]) => ({ run_id: jobIdFromKey(key), reason }));
    // One accounting everywhere (status, dashboard, report, this summary): a run stopped by a cancel
    // is cancelled, not failed, whether it was waiting (removed) or running (failed with `cancelled:`).
    const stoppedByCancel = (reason: string) => /^cancelled: /.test(reason);
    const failed = ended.filter((f) => !stoppedByCancel(f.reason));

    let auditDir: string | null = null;
    try {
      auditDir = resolveInsideArtifacts(ctx.artifactsDir, job.data.audit_dir);
    } catch {
      auditDir = null;
    }
    if (auditDir !== null && existsSync(auditDir)) {
      const time = new Date().toISOString();
      for (const failure of ended) {
        const runDir = runDirOf(auditDir, failure.run_id);
        const outDir = outputDirOf(runDir);
        if (!existsSync(runDir)) continue;
        // A run refused for its paths (bad_job: output/ or a symlink in it leads out of the root)
        // gets no file there either: writing would follow that symlink. Its reason is in Redis.
        if (!outputInsideRoot(ctx.artifactsDir, outDir)) continue;
        const run = await ctx.runs.getJob(failure.run_id);
        await writeFailureRecordIfMissing(outDir, {
          run_id: failure.run_id,
          kind: kindFromReason(failure.reason),
          message: failure.reason,
          attempts: run?.attemptsMade ?? 0,
          time,
        }).catch((error: unknown) => {
          // A full or failing disk must not fail the audit's summary: the reason is in Redis.
          log.warn({ run: failure.run_id, err: error }, 'failure.json not written');
        });
      }
    }
    return mergeAuditReturns(job.data.earlier, {
      audit_id: job.data.audit_id,
      completed: Object.keys(values).map(jobIdFromKey).sort(),
      failed: failed.sort((a, b) => a.run_id.localeCompare(b.run_id)),
      cancelled: [
        ...new Set([
          ...Object.keys(cancelledRuns),
          ...ended.filter((f) => stoppedByCancel(f.reason)).map((f) => f.run_id),
        ]),
      ].sort(),
      finished: new Date().toISOString(),
    });
  };
}

function outputInsideRoot(artifactsDir: string, outDir: string): boolean {
  try {
    checkOutputInsideArtifacts(artifactsDir, outDir);
    return true;
  } catch {
    return false;
  }
}

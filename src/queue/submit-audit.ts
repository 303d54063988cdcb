import { randomBytes } from 'node:crypto';
import { toArtifactRelative } from '../fs/artifact-path.js';
import type { AuditJobData, AuditReturn, RunJobData } from './job-data.js';
import { AUDIT_JOB, AUDITS_QUEUE, RUN_JOB, RUNS_QUEUE } from './names.js';
import { openFlowProducer, openQueues, type QueueConnection } from './queues.js';
import type { QueueTuning } from './tuning.js';
import { collectStatus, type AuditState } from './status.js';
import { UserInputError } from '../errors.js';
import { readFleet, type WorkerStatus } from './fleet.js';
import { openRedis } from './queues.js';

/**
 * Queue an audit as one BullMQ flow: the audit parent (job id = audit id) with one child per run
 * (job id = run id, the manifest's content hash). An audit already in Redis is left alone, so a
 * second submit of the same grid adds nothing, even after cancel removed some of its runs.
 *
 * Children carry `ignoreDependencyOnFailure`: a run that fails for good does not block the audit;
 * the parent becomes ready when every run has completed, failed or been cancelled.
 */
export interface SubmitRun {
  runId: string;
  cellId: string;
  /** Absolute manifest.json inside the artifact root. */
  manifestPath: string;
  /** GPU slots of one host the run takes (training.gpus); absent = 1. */
  gpus?: number;
}

export interface SubmitAuditInput {
  auditId: string;
  name: string;
  /** Absolute audit folder inside the artifact root. */
  auditDir: string;
  runs: SubmitRun[];
}

export interface SubmitOutcome {
  auditId: string;
  added: boolean;
  /** State of the audit (as `status` shows it) when it was already in the queue; null when just added. */
  existingState: AuditState | null;
  runs: number;
}

/** How many job log lines Redis keeps per run (older ones are trimmed). */
export const KEEP_LOGS = 500;

/**
 * Sequential replicates submit a look at a time: `listed` is every run the audit holds so far (the
 * parent's run list, which status reads), `input.runs` the ones to queue now, `sequential` where
 * the looks stand, `submitted` the first look's time (src/queue/extend-audit.ts).
 */
export interface SubmitExtras {
  listed?: { run_id: string; cell_id: string }[];
  sequential?: AuditJobData['sequential'];
  submitted?: string;
  /** The previous looks' summary (the replaced parent's return value). */
  earlier?: AuditReturn;
}

export async function submitAudit(
  conn: QueueConnection,
  artifactsDir: string,
  input: SubmitAuditInput,
  tuning: Pick<QueueTuning, 'attempts' | 'backoffMs'>,
  extras: SubmitExtras = {},
): Promise<SubmitOutcome> {
  const queues = openQueues(conn);
  try {
    const existing = await queues.audits.getJob(input.auditId);
    if (existing) {
      const [status] = await collectStatus(conn, input.auditId);
      return {
        auditId: input.auditId,
        added: false,
        existingState: status?.state ?? 'queued',
        runs: input.runs.length,
      };
    }
    await refuseOversizedRuns(conn, input.runs);
    const parentData: AuditJobData = {
      audit_id: input.auditId,
      name: input.name,
      audit_dir: toArtifactRelative(artifactsDir, input.auditDir),
      runs: extras.listed ?? input.runs.map((r) => ({ run_id: r.runId, cell_id: r.cellId })),
      submitted: extras.submitted ?? new Date().toISOString(),
      submit_id: randomBytes(12).toString('hex'),
      ...(extras.sequential ? { sequential: extras.sequential } : {}),
      ...(extras.earlier ? { earlier: extras.earlier } : {}),
    };
    const flow = openFlowProducer(conn);
    try {
      await flow.add({
        name: AUDIT_JOB,
        queueName: AUDITS_QUEUE,
        data: parentData,
        opts: { jobId: input.auditId },
        children: input.runs.map((run) => {
          const data: RunJobData = {
            audit_id: input.auditId,
            run_id: run.runId,
            cell_id: run.cellId,
            manifest: toArtifactRelative(artifactsDir, run.manifestPath),
            ...(run.gpus !== undefined && run.gpus > 1 ? { gpus: run.gpus } : {}),
          };
          return {
            name: RUN_JOB,
            queueName: RUNS_QUEUE,
            data,
            opts: {
              jobId: run.runId,
              attempts: tuning.attempts,
              backoff: { type: 'exponential', delay: tuning.backoffMs },
              ignoreDependencyOnFailure: true,
              keepLogs: KEEP_LOGS,
            },
          };
        }),
      });
    } finally {
      await flow.close();
    }
    // Concurrent submits of one audit all pass the check above; BullMQ keeps the first flow's jobs
    // (job ids are content hashes) and ignores the others: the parent's submit_id tells which won.
    const created = await queues.audits.getJob(input.auditId);
    if (created && created.data.submit_id !== parentData.submit_id) {
      const [status] = await collectStatus(conn, input.auditId);
      return {
        auditId: input.auditId,
        added: false,
        existingState: status?.state ?? 'queued',
        runs: input.runs.length,
      };
    }
    return { auditId: input.auditId, added: true, existingState: null, runs: input.runs.length };
  } finally {
    await queues.close();
  }
}

/** Slots of a worker process (one host's pool): GPUs, or CPU shares on a CPU worker. */
function slotCount(worker: Pick<WorkerStatus, 'slots'>): number {
  return worker.slots.length;
}

/**
 * A run over more GPUs than any live worker of the fleet has can never start: refused before
 * anything is queued, naming the fleet's largest host. With no live worker (workers are started
 * later) nothing is known, and the runs are queued.
 */
async function refuseOversizedRuns(conn: QueueConnection, runs: SubmitRun[]): Promise<void> {
  const need = Math.max(1, ...runs.map((r) => r.gpus ?? 1));
  if (need <= 1) return;
  const client = openRedis(conn, false);
  let fleet: WorkerStatus[];
  try {
    fleet = (await readFleet(client, conn.prefix)).filter((w) => w.state !== 'lost');
  } finally {
    client.disconnect();
  }
  if (fleet.length === 0) return;
  const largest = fleet.reduce((a, b) => (slotCount(b) > slotCount(a) ? b : a));
  const has = slotCount(largest);
  if (has >= need) return;
  const kind = largest.slots.some((s) => s.gpu !== null) ? 'GPU' : 'CPU';
  throw new UserInputError(
    `runs need ${need} GPUs of one host (training.gpus), but the largest worker in the fleet, ${largest.host} (${largest.worker_id}), has ${has} ${kind} slot${has === 1 ? '' : 's'}; lower training.gpus to ${Math.max(1, has)} or start a worker with --gpus listing ${need} GPUs`,
    { field: 'training.gpus', code: 'E_TOO_MANY_GPUS' },
  );
}

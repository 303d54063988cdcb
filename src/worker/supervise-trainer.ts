import { appendFile, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Job } from 'bullmq';
import { log } from '../log.js';
import { startTrainer, type TrainerJob, type TrainerOutcome, type TrainerRunner } from '../runner/index.js';
import type { RunJobData, RunProgress, RunReturn } from '../queue/job-data.js';
import type { ProgressTracker } from './progress-tracker.js';
import type { QueueTuning } from '../queue/tuning.js';

/** Why a worker stopped a trainer before it ended by itself. */
export const ABORT_SHUTDOWN = 'shutdown';
export const ABORT_CANCEL = 'cancel';
/** The worker may no longer own the run (its job lock expired or was refused): never two trainers. */
export const ABORT_LEASE = 'lease';
export type StopReason = typeof ABORT_SHUTDOWN | typeof ABORT_CANCEL | typeof ABORT_LEASE;

export interface WorkerSlot {
  /** GPU index exported as CUDA_VISIBLE_DEVICES, or null for a CPU slot. */
  gpu: string | null;
  /** CANARY_TRAINER_THREADS for CPU slots, or null. */
  threads: number | null;
  /** A run over several slots of this host (gang): trainer ranks; absent = 1. */
  ranks?: number;
}

export interface SupervisorContext {
  runner: TrainerRunner;
  tuning: QueueTuning;
  host: string;
  slot: WorkerSlot;
  /** ISO time the audit was cancelled, or null (reads <prefix>:cancelled:<audit_id>). */
  cancelledAt(auditId: string): Promise<string | null>;
  /** How often a running job re-reads the cancel flag, in ms (pub/sub is the fast path). */
  cancelPollMs?: number;
  /** Why this worker may have lost the job's lock, or null while it holds it (see LeaseWatch). */
  leaseLost?(jobId: string): string | null;
  /** Called with each progress record written to Redis (the fleet's loss curves). */
  onProgress?(runId: string, progress: RunProgress): void;
  /** Called with each trainer started, as a promise of its exit (a shutdown waits for these). */
  onTrainer?(finished: Promise<unknown>): void;
}

export interface SupervisedAttempt {
  job: Job<RunJobData, RunReturn>;
  number: number;
  outDir: string;
  trainerJob: TrainerJob;
}

/**
 * Start the trainer, relay its events as progress and job logs, and stop it on shutdown or cancel
 * (the abort signal, or a cancel flag polled as a safety net for one published while this worker
 * was disconnected from Redis) or when the job's lease is lost. Resolves when the trainer has exited.
 */
export async function superviseTrainer(
  ctx: SupervisorContext,
  attempt: SupervisedAttempt,
  tracker: ProgressTracker,
  writer: ProgressWriter,
  signal: AbortSignal | undefined,
): Promise<{ outcome: TrainerOutcome; stopReason: StopReason | null }> {
  const { job } = attempt;
  const stderrLog = join(attempt.outDir, 'trainer.stderr.log');
  await appendFileLine(
    stderrLog,
    `[canary-audit] ${new Date().toISOString()} attempt ${attempt.number} of ${job.data.run_id} on ${ctx.host} gpu=${ctx.slot.gpu ?? 'none'} worker_pid=${process.pid}`,
  );
  const trainer = await startTrainer({
    runner: ctx.runner,
    job: attempt.trainerJob,
    stderrLog,
    stopGraceMs: ctx.tuning.stopGraceMs,
    onEvent(event) {
      const out = tracker.apply(event);
      if (out.write) writer.request(tracker.progress);
      if (out.write) ctx.onProgress?.(job.data.run_id, tracker.progress);
      if (out.log) void job.log(out.log).catch(() => undefined);
    },
  });

  ctx.onTrainer?.(trainer.finished);
  let stopReason: StopReason | null = null;
  const stop = (reason: StopReason, why?: string) => {
    if (stopReason !== null) return;
    stopReason = reason;
    tracker.setPhase('stopping');
    writer.request(tracker.progress);
    if (why) log.warn({ run: job.id, why }, 'lease lost: stopping trainer (it checkpoints; the run resumes)');
    void job.log(`stopping trainer (${reason}${why ? `: ${why}` : ''})`).catch(() => undefined);
    trainer.stop();
  };
  const onAbort = () => stop(signal?.reason === ABORT_SHUTDOWN ? ABORT_SHUTDOWN : ABORT_CANCEL);
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  const timers = [
    watchCancel(ctx, job.data.audit_id, () => stop(ABORT_CANCEL)),
    watchLease(ctx, job.id ?? '', (why) => stop(ABORT_LEASE, why)),
  ];
  try {
    return { outcome: await trainer.finished, stopReason };
  } finally {
    for (const timer of timers) clearInterval(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

function watchCancel(ctx: SupervisorContext, auditId: string, stop: () => void): NodeJS.Timeout {
  return setInterval(() => {
    ctx.cancelledAt(auditId).then(
      (at) => {
        if (at) stop();
      },
      () => undefined,
    );
  }, ctx.cancelPollMs ?? 10_000);
}

/** Checked often enough to stop the trainer within a tenth of a lock (at most 1 s) of the loss. */
function watchLease(ctx: SupervisorContext, jobId: string, stop: (why: string) => void): NodeJS.Timeout {
  const everyMs = Math.min(1_000, Math.max(50, ctx.tuning.lockMs / 10));
  return setInterval(() => {
    const why = ctx.leaseLost?.(jobId);
    if (why) stop(why);
  }, everyMs);
}

async function appendFileLine(path: string, line: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await appendFile(path, `${line}\n`);
}

/**
 * Latest-wins progress writes: at most one updateProgress in flight; a request made meanwhile is
 * sent when it returns. A slow or restarting Redis never piles up stale writes.
 */
export class ProgressWriter {
  private inFlight: Promise<void> | null = null;
  private pending: RunProgress | null = null;

  constructor(private readonly job: Job) {}

  request(progress: RunProgress): void {
    this.pending = { ...progress, eval: progress.eval ? { ...progress.eval } : null };
    if (!this.inFlight) this.inFlight = this.drain();
  }

  async flush(): Promise<void> {
    while (this.inFlight) await this.inFlight;
  }

  private async drain(): Promise<void> {
    while (this.pending) {
      const next = this.pending;
      this.pending = null;
      try {
        await this.job.updateProgress(next as unknown as object);
      } catch (error) {
        log.debug({ err: error, job: this.job.id }, 'progress write failed');
      }
    }
    this.inFlight = null;
  }
}

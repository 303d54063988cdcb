import { existsSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { UnrecoverableError, WaitingError, type Job, type Processor } from 'bullmq';
import { sha256Hex } from '../hash.js';
import { outputDirOf, outputDirOfManifest, RESULT_FILE } from '../layout.js';
import { log } from '../log.js';
import type { TrainerOutcome } from '../runner/index.js';
import {
  ArtifactPathError,
  checkOutputInsideArtifacts,
  resolveInsideArtifacts,
  toArtifactRelative,
} from '../fs/artifact-path.js';
import { clearFailureRecord, writeFailureRecord } from '../queue/failure-record.js';
import { explainWriteError } from '../fs/write-error.js';
import { MAX_JSON_BYTES } from '../fs/json-file.js';
import { readInsideSync } from '../fs/read-boundary.js';
import type { RunJobData, RunReturn } from '../queue/job-data.js';
import { ProgressTracker } from './progress-tracker.js';
import {
  ABORT_CANCEL,
  ABORT_LEASE,
  ABORT_SHUTDOWN,
  ProgressWriter,
  superviseTrainer,
  type StopReason,
  type SupervisorContext,
} from './supervise-trainer.js';

export { ABORT_CANCEL, ABORT_LEASE, ABORT_SHUTDOWN, type WorkerSlot } from './supervise-trainer.js';

/**
 * The BullMQ processor of a run job: resolve the manifest inside the artifact root, run the trainer
 * as a child process, relay its events as job progress and job logs, and turn its exit into the
 * queue's language:
 *   ok                       -> return value {result, output, ...}
 *   final (exit 2/3/4/5)     -> UnrecoverableError: no retry; failure.json written
 *   retry (exit 1, crash)    -> Error: BullMQ retries with backoff; failure.json on the last attempt
 *   stopped for shutdown     -> job moved back to wait (WaitingError): no attempt spent
 *   folder busy (exit 6)     -> the same: another live trainer holds the output folder
 *   stopped for a lost lease -> handed back (WaitingError): no attempt spent; the taker resumes
 *   stopped for cancel       -> UnrecoverableError("cancelled: ..."); failure.json kind=cancelled
 */
export interface RunProcessorContext extends SupervisorContext {
  artifactsDir: string;
  /** True once the worker process began shutting down. */
  shuttingDown(): boolean;
}

/** Raised for a failure that must not be retried; the message starts with the failure kind. */
function finalError(kind: string, message: string): UnrecoverableError {
  return new UnrecoverableError(`${kind}: ${message}`);
}

export function createRunProcessor(ctx: RunProcessorContext): Processor<RunJobData, RunReturn> {
  return async (job: Job<RunJobData, RunReturn>, token?: string, signal?: AbortSignal): Promise<RunReturn> => {
    const attempt = new RunAttempt(ctx, job, token, resolveManifest(ctx, job.data));
    const early = await attempt.beforeStart();
    if (early) return early;
    const tracker = new ProgressTracker(
      { host: ctx.host, gpu: ctx.slot.gpu, worker_pid: process.pid, attempt: attempt.number },
      { progressMs: ctx.tuning.progressMs, stepLogMs: ctx.tuning.stepLogMs },
    );
    const writer = new ProgressWriter(job);
    writer.request(tracker.progress);
    const ranks = ctx.slot.ranks ?? 1;
    await job.log(
      `attempt ${attempt.number}/${attempt.max} on ${ctx.host} ${ctx.slot.gpu === null ? 'cpu' : `gpu ${ctx.slot.gpu}`}${ranks > 1 ? ` (${ranks} ranks)` : ''} (runner ${ctx.runner.name})`,
    );
    const { outcome, stopReason } = await superviseTrainer(ctx, attempt, tracker, writer, signal).catch(
      (error: unknown) => {
        throw diskFull(error, attempt.outDir) ?? error;
      },
    );
    await writer.flush();
    await job
      .log(
        `trainer exit ${outcome.exitCode ?? outcome.signal}: ${outcome.outcome} (${outcome.kind}) after ${(outcome.wallMs / 1000).toFixed(1)} s`,
      )
      .catch(() => undefined);
    return attempt.settle(outcome, stopReason, tracker.trained);
  };
}

/**
 * The worker's own writes into the run's output folder (the trainer log's attempt header) on a full
 * disk: final, like the trainer's disk_full; another attempt on the same disk would fail the same way.
 */
function diskFull(error: unknown, outDir: string): UnrecoverableError | null {
  const code = (error as NodeJS.ErrnoException)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return null;
  return finalError('disk_full', explainWriteError(error, outDir)?.message ?? String(error));
}

/**
 * The run's manifest, resolved inside the artifact root, and its output folder checked: a path, or a
 * symlink in the output folder, that leads outside the root is refused for good, before any write.
 */
function resolveManifest(ctx: RunProcessorContext, data: RunJobData): string {
  try {
    const manifest = resolveInsideArtifacts(ctx.artifactsDir, data.manifest);
    checkOutputInsideArtifacts(ctx.artifactsDir, outputDirOfManifest(manifest));
    return manifest;
  } catch (error) {
    // No folder of ours to record the failure in: the refusal lives in Redis (failedReason).
    if (error instanceof ArtifactPathError) throw finalError('bad_job', error.message);
    throw error;
  }
}

/** One attempt at a run job: its paths, and how each way it can end is told to the queue. */
class RunAttempt {
  readonly data: RunJobData;
  readonly number: number;
  readonly max: number;
  readonly runDir: string;
  readonly outDir: string;

  constructor(
    readonly ctx: RunProcessorContext,
    readonly job: Job<RunJobData, RunReturn>,
    private readonly token: string | undefined,
    readonly manifestPath: string,
  ) {
    this.data = job.data;
    this.number = job.attemptsMade + 1;
    this.max = job.opts.attempts ?? 1;
    this.runDir = dirname(manifestPath);
    this.outDir = outputDirOf(this.runDir);
  }

  /** Before any trainer starts: shutdown, cancel, a missing manifest, or a result already there. */
  async beforeStart(): Promise<RunReturn | null> {
    const { ctx, data, outDir } = this;
    // A job fetched just before shutdown began: give it back untouched.
    if (ctx.shuttingDown()) return this.backToQueue('worker shutting down before start');
    const cancelled = await ctx.cancelledAt(data.audit_id);
    if (cancelled) return this.failFinal('cancelled', `audit ${data.audit_id} cancelled at ${cancelled}`);
    if (!existsSync(this.manifestPath)) {
      // Retryable, and nothing written: on a host without the store mounted, any file we wrote
      // would start a stray tree under the wrong root.
      throw new Error(
        `missing_manifest: ${this.manifestPath} does not exist on ${ctx.host}; is the artifact store mounted at ${ctx.artifactsDir}?`,
      );
    }
    const reused = reusableResult(outDir, this.manifestPath, data.run_id);
    await clearFailureRecord(outDir);
    if (reused) {
      await this.job.log(`result.json already present for this manifest: not training again`);
      return runReturn(ctx, data, outDir, reused, 0, 0, true);
    }
    return null;
  }

  /**
   * The trainer's exit in the queue's language (see the table at the top of this file). `trained`:
   * whether the trainer announced training; a trainer that ends `done` without it found result.json
   * complete for this manifest under the folder lock (another trainer, whose worker had lost the
   * run's lock, finished it while this one waited): the run is reused, not trained twice.
   */
  async settle(outcome: TrainerOutcome, stopReason: StopReason | null, trained = true): Promise<RunReturn> {
    if (outcome.outcome === 'ok') {
      const reported = outcome.done
        ? (this.ctx.runner.toHostPath?.(outcome.done.result, this.trainerJob) ?? outcome.done.result)
        : RESULT_FILE;
      const resultPath = resolveResult(this.outDir, reported);
      if (!existsSync(resultPath))
        return this.failRetryable('missing_result', `trainer reported done but ${resultPath} does not exist`);
      if (!trained)
        await this.job
          .log(
            'the trainer found result.json complete for this manifest once it held the output folder: not trained again',
          )
          .catch(() => undefined);
      return runReturn(
        this.ctx,
        this.data,
        this.outDir,
        resultPath,
        outcome.done?.wall_s ?? outcome.wallMs / 1000,
        outcome.wallMs / 1000,
        !trained,
      );
    }
    if (stopReason === ABORT_CANCEL) return this.failFinal('cancelled', `cancelled while running (${outcome.message})`);
    if (outcome.outcome === 'final') return this.failFinal(outcome.kind, outcome.message);
    if (stopReason === ABORT_LEASE) return this.handBack(`lock lost; trainer ${outcome.kind}`);
    if (stopReason === ABORT_SHUTDOWN) return this.backToQueue(`worker shutdown; trainer ${outcome.kind}`);
    if (outcome.outcome === 'busy') return this.backToQueue(`output folder busy: ${outcome.message}`);
    return this.failRetryable(outcome.kind, outcome.message);
  }

  get trainerJob() {
    const { gpu, threads, ranks } = this.ctx.slot;
    return {
      runId: this.data.run_id,
      runDir: this.runDir,
      manifestPath: this.manifestPath,
      outDir: this.outDir,
      gpu,
      threads,
      ...(ranks !== undefined && ranks > 1 ? { ranks } : {}),
    };
  }

  private async failFinal(kind: string, message: string): Promise<never> {
    // A record that cannot be written (the disk that failed the run is full) must not turn a final
    // failure into a retried one: the reason still reaches Redis (failedReason).
    await writeFailureRecord(this.outDir, {
      run_id: this.data.run_id,
      kind,
      message,
      attempts: this.number,
      time: new Date().toISOString(),
    }).catch((error: unknown) => log.warn({ run: this.data.run_id, err: error }, 'failure.json not written'));
    throw finalError(kind, message);
  }

  private async failRetryable(kind: string, message: string): Promise<never> {
    if (this.number >= this.max) {
      await writeFailureRecord(this.outDir, {
        run_id: this.data.run_id,
        kind,
        message,
        attempts: this.number,
        time: new Date().toISOString(),
      });
    }
    throw new Error(`${kind}: ${message}`);
  }

  private async backToQueue(why: string): Promise<never> {
    await this.job.log(`returned to the queue: ${why}`).catch(() => undefined);
    if (this.token !== undefined) await this.job.moveToWait(this.token);
    throw new WaitingError();
  }

  /**
   * After a lost lease: give the job back if the lock is still ours after all; otherwise another
   * worker owns it, or the stalled-job check will hand it to one. Either way no attempt is spent.
   */
  private async handBack(why: string): Promise<never> {
    await this.job.log(`handed back: ${why}`).catch(() => undefined);
    if (this.token !== undefined) {
      await this.job.moveToWait(this.token).catch((error: unknown) => {
        log.info(
          { run: this.job.id, err: error },
          'lease lost: the run is left to its new owner or the stalled-job check',
        );
      });
    }
    throw new WaitingError();
  }
}

function resolveResult(outDir: string, reported: string): string {
  return isAbsolute(reported) ? reported : join(outDir, reported);
}

/** result.json from an earlier attempt of this exact manifest (a lost completion, a re-submit). */
function reusableResult(outDir: string, manifestPath: string, runId: string): string | null {
  const resultPath = join(outDir, RESULT_FILE);
  if (!existsSync(resultPath)) return null;
  try {
    // Through the read boundary of the run's folder: a result.json or manifest that is a FIFO, a
    // device or a link out is not reused (the run trains instead), and never hangs the worker.
    const result = JSON.parse(
      readInsideSync(outDir, resultPath, { maxBytes: MAX_JSON_BYTES, what: 'result.json' }).toString('utf8'),
    ) as { run_id?: string; manifest_sha256?: string };
    const manifestSha = sha256Hex(
      readInsideSync(dirname(manifestPath), manifestPath, { maxBytes: MAX_JSON_BYTES, what: 'manifest' }),
    );
    return result.run_id === runId && result.manifest_sha256 === manifestSha ? resultPath : null;
  } catch {
    return null;
  }
}

function runReturn(
  ctx: RunProcessorContext,
  data: RunJobData,
  outDir: string,
  resultPath: string,
  wallS: number,
  processS: number,
  reused: boolean,
): RunReturn {
  return {
    run_id: data.run_id,
    result: toArtifactRelative(ctx.artifactsDir, resultPath),
    output: toArtifactRelative(ctx.artifactsDir, outDir),
    wall_s: wallS,
    process_s: processS,
    host: ctx.host,
    gpu: ctx.slot.gpu,
    reused,
  };
}

import { dirname } from 'node:path';
import { hostname } from 'node:os';
import { DelayedError, Queue, Worker, WaitingError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { log } from '../log.js';
import type { TrainerRunner } from '../runner/index.js';
import { resolveInsideArtifacts } from '../fs/artifact-path.js';
import { createAuditProcessor } from './audit-processor.js';
import { kindFromReason, writeFailureRecordIfMissing } from '../queue/failure-record.js';
import type { AuditJobData, AuditReturn, RunJobData, RunReturn } from '../queue/job-data.js';
import { LeaseWatch } from './lease-watch.js';
import { AUDITS_QUEUE, RUNS_QUEUE } from '../queue/names.js';
import { openRedis, type QueueConnection } from '../queue/queues.js';
import { withSocketTimeout, workerSocketTimeoutMs } from '../queue/connection.js';
import { ABORT_CANCEL, ABORT_SHUTDOWN, createRunProcessor, type WorkerSlot } from './run-processor.js';
import { FleetHeartbeat, LossCurveWriter } from '../queue/fleet.js';
import { describeSlot, gangSlot, SlotBook } from './slots.js';
import type { QueueTuning } from '../queue/tuning.js';
import { outputDirOf } from '../layout.js';
import {
  CLOSE_MS,
  HANDBACK_MS,
  REDIS_PROBE_MS,
  SHUTDOWN_MARGIN_MS,
  TRAINER_REAP_MS,
  redisSilence,
  within,
} from './shutdown-steps.js';

/**
 * The workers of one host: one BullMQ Worker per slot (GPU or CPU share), concurrency 1 each, plus
 * one Worker for audit parents and one Redis subscriber for cancel messages.
 *
 * Shutdown (SIGTERM/SIGINT) is bounded whatever Redis does: every trainer gets SIGTERM, checkpoints
 * and exits, its job goes back to the front of the queue without spending an attempt, and the pool
 * is closed within stopGraceMs + SHUTDOWN_MARGIN_MS (the steps: shutdown-steps.ts). A Redis that is
 * gone or silent is not waited for: connections are force-closed and the runs not handed back return
 * to the queue when their lock expires.
 */
export { SHUTDOWN_MARGIN_MS };

/** How a shutdown ended. */
export interface ShutdownReport {
  /** Wall ms from the call to the end. */
  ms: number;
  /** Why connections were force-closed before the orderly close ended, or null. */
  forced: string | null;
  /** Runs whose hand-back Redis did not confirm: they go back to the queue when their lock expires. */
  notHandedBack: string[];
}

export interface WorkerPoolOptions {
  conn: QueueConnection;
  artifactsDir: string;
  runner: TrainerRunner;
  slots: WorkerSlot[];
  tuning: QueueTuning;
  host?: string;
  /** How often a running job re-reads the cancel flag, in ms; default 10000. */
  cancelPollMs?: number;
  /** A run over several slots that finds too few free goes back to the queue for this long, in ms; default 2000. */
  gangRetryMs?: number;
  /** ms without a reply before a connection's socket is destroyed and remade; default workerSocketTimeoutMs(drainDelayS). */
  socketTimeoutMs?: number;
}

/** A run over more slots than this host has waits this long before another host (or this one) looks again. */
const GANG_TOO_BIG_RETRY_MS = 30_000;
/** The least a gang run's reservation of this host lasts without the run asking again (5 retries otherwise). */
const GANG_HOLD_MIN_MS = 10_000;

interface ActiveRun {
  worker: Worker<RunJobData, RunReturn>;
  auditId: string;
}

export class WorkerPool {
  readonly runWorkers: Worker<RunJobData, RunReturn>[] = [];
  readonly host: string;
  private auditWorker: Worker<AuditJobData, AuditReturn> | null = null;
  private runsQueue: Queue<RunJobData, RunReturn> | null = null;
  private readonly client: Redis;
  private readonly subscriber: Redis;
  private readonly active = new Map<string, ActiveRun>();
  private readonly leases: LeaseWatch;
  private stopping = false;
  private closing: Promise<ShutdownReport> | null = null;
  /** Run processors in progress and trainers alive: what a shutdown waits for. */
  private readonly processing = new Set<Promise<unknown>>();
  private readonly trainers = new Set<Promise<unknown>>();
  private readonly heartbeat: FleetHeartbeat;
  private readonly lossCurves: LossCurveWriter;
  private readonly book: SlotBook;

  private constructor(private readonly options: WorkerPoolOptions) {
    this.host = options.host ?? hostname();
    this.client = openRedis(options.conn, true);
    this.subscriber = openRedis(options.conn, true);
    this.leases = new LeaseWatch(options.tuning.lockMs);
    this.book = new SlotBook(options.slots.length);
    this.lossCurves = new LossCurveWriter(this.client, options.conn.prefix);
    this.heartbeat = new FleetHeartbeat(this.client, options.conn, {
      host: this.host,
      runner: options.runner.name,
      slots: () => this.slotBeats(),
    });
  }

  /** What each slot runs now, for the fleet heartbeat. */
  private slotBeats() {
    return this.options.slots.map((slot, index) => {
      // A slot lent to a run over several slots shows that run too.
      const runId = this.book.holder(index);
      const run = runId === null ? undefined : this.active.get(runId);
      return { index, gpu: slot.gpu, run_id: run ? runId : null, audit_id: run?.auditId ?? null };
    });
  }

  static async start(given: WorkerPoolOptions): Promise<WorkerPool> {
    // Every connection of the pool (BullMQ's, the cancel subscriber, the heartbeat's) drops a socket
    // that gets no reply in time, so a slot recovers after a partition instead of waiting on TCP backoff.
    const socketTimeoutMs = given.socketTimeoutMs ?? workerSocketTimeoutMs(given.tuning.drainDelayS);
    const options = { ...given, conn: withSocketTimeout(given.conn, socketTimeoutMs) };
    const pool = new WorkerPool(options);
    await pool.listenForCancel();
    pool.startWorkers();
    await Promise.all([...pool.runWorkers.map((w) => w.waitUntilReady()), pool.auditWorker?.waitUntilReady()]);
    await pool.heartbeat.start();
    log.info(
      {
        host: pool.host,
        slots: options.slots.map(describeSlot),
        runner: options.runner.name,
        redis: options.conn.redacted,
      },
      'workers ready',
    );
    return pool;
  }

  /** Run ids this host is working on now. */
  activeRuns(): string[] {
    return [...this.active.keys()];
  }

  private async listenForCancel(): Promise<void> {
    const channel = this.options.conn.keys.cancelChannel;
    this.subscriber.on('message', (ch: string, message: string) => {
      if (ch !== channel) return;
      let auditId: string | undefined;
      try {
        auditId = (JSON.parse(message) as { audit_id?: string }).audit_id;
      } catch {
        return;
      }
      for (const [runId, run] of this.active) {
        if (run.auditId === auditId) {
          log.info({ run: runId, audit: auditId }, 'cancel received: stopping trainer');
          run.worker.cancelJob(runId, ABORT_CANCEL);
        }
      }
    });
    await this.subscriber.subscribe(channel);
  }

  private startWorkers(): void {
    const { conn, tuning, artifactsDir, runner } = this.options;
    const cancelledAt = (auditId: string) => this.client.get(conn.keys.cancelled(auditId));
    const processorFor = (slot: WorkerSlot) =>
      createRunProcessor({
        artifactsDir,
        runner,
        tuning,
        host: this.host,
        slot,
        cancelledAt,
        shuttingDown: () => this.stopping,
        leaseLost: (jobId) => this.leases.lost(jobId),
        onProgress: (runId, progress) => this.lossCurves.record(runId, progress),
        onTrainer: (finished) => this.track(this.trainers, finished),
        ...(this.options.cancelPollMs !== undefined ? { cancelPollMs: this.options.cancelPollMs } : {}),
      });
    this.options.slots.forEach((slot, index) => {
      const runJob = async (job: Job<RunJobData, RunReturn>, token: string | undefined, signal?: AbortSignal) => {
        const taken = await this.takeSlots(job, token, index);
        const slots = taken.map((i) => this.options.slots[i] as WorkerSlot);
        // The other slots of a gang stop fetching runs until it ends.
        const lent = taken.filter((i) => i !== index).map((i) => this.runWorkers[i] as Worker<RunJobData, RunReturn>);
        await Promise.all(lent.map((w) => w.pause(true)));
        this.active.set(job.id ?? '', { worker, auditId: job.data.audit_id });
        this.leases.begin(job.id ?? '');
        void this.heartbeat.beat();
        try {
          return await processorFor(gangSlot(slots))(job, token, signal);
        } finally {
          this.active.delete(job.id ?? '');
          this.leases.end(job.id ?? '');
          this.lossCurves.forget(job.id ?? '');
          this.book.release(taken);
          if (!this.stopping) for (const w of lent) w.resume();
          void this.heartbeat.beat();
        }
      };
      const worker: Worker<RunJobData, RunReturn> = new Worker<RunJobData, RunReturn>(
        RUNS_QUEUE,
        // Declared with three parameters: BullMQ creates the AbortSignal only for such processors.
        (job, token, signal) => this.track(this.processing, runJob(job, token, signal)),
        {
          connection: conn.options,
          prefix: conn.prefix,
          // Unique per slot: job.processedBy then says which slot ran a job.
          name: `${this.host}#${index} ${describeSlot(slot)}`,
          concurrency: 1,
          lockDuration: tuning.lockMs,
          stalledInterval: tuning.stalledMs,
          maxStalledCount: tuning.maxStalled,
          drainDelay: tuning.drainDelayS,
        },
      );
      this.leases.attach(worker);
      worker.on('error', (error) => log.warn({ err: error, slot: describeSlot(slot) }, 'worker connection error'));
      worker.on('failed', (job, error) => {
        if (job) void this.recordFinalFailure(job, error);
      });
      worker.on('stalled', (jobId) =>
        log.warn({ run: jobId }, 'run stalled (its worker died or froze); back in the queue'),
      );
      this.runWorkers.push(worker);
    });

    this.runsQueue = new Queue<RunJobData, RunReturn>(RUNS_QUEUE, { connection: conn.options, prefix: conn.prefix });
    this.runsQueue.on('error', () => undefined);
    this.auditWorker = new Worker<AuditJobData, AuditReturn>(
      AUDITS_QUEUE,
      createAuditProcessor({ artifactsDir, keys: conn.keys, redis: this.client, runs: this.runsQueue }),
      {
        connection: conn.options,
        prefix: conn.prefix,
        name: `${this.host}/audits`,
        concurrency: 4,
        lockDuration: tuning.lockMs,
        stalledInterval: tuning.stalledMs,
        drainDelay: tuning.drainDelayS,
      },
    );
    this.auditWorker.on('error', (error) => log.warn({ err: error }, 'audit worker connection error'));
    this.auditWorker.on('completed', (job, value) =>
      log.info(
        {
          audit: job.id,
          completed: value.completed.length,
          failed: value.failed.length,
          cancelled: value.cancelled.length,
        },
        'audit finished',
      ),
    );
  }

  /**
   * The slots a fetched run takes: its own slot, or for a run over N slots (training.gpus) N slots
   * of this host at once. When they are not all free the run goes back to the queue (delayed, no
   * attempt spent) holding none; a slot lent to another run gives back what it fetched meanwhile.
   */
  private async takeSlots(
    job: Job<RunJobData, RunReturn>,
    token: string | undefined,
    index: number,
  ): Promise<number[]> {
    const need = Math.max(1, job.data.gpus ?? 1);
    const runId = job.id ?? '';
    if (this.book.holder(index) !== null) {
      // Fetched in the moment between a gang taking this slot and pausing its worker.
      if (token !== undefined) await job.moveToWait(token);
      throw new WaitingError();
    }
    const taken = this.book.take(index, need, runId);
    if (taken) return taken;
    const size = this.options.slots.length;
    const retry = this.options.gangRetryMs ?? 2_000;
    const delay = need > size ? GANG_TOO_BIG_RETRY_MS : retry;
    // A run over several slots keeps the host for itself until it has them (gang priority); the
    // reservation lapses when the run is not fetched here again for a while.
    this.book.reserve(runId, need, Math.max(GANG_HOLD_MIN_MS, 5 * retry));
    const reserved = this.book.reservedBy();
    log.debug(
      { run: runId, need, free: this.book.free(), slots: size, reserved_for: reserved },
      need > size
        ? 'run needs more slots than this host has'
        : reserved !== null && reserved !== runId
          ? 'run waits: the slots are held for a run over several slots'
          : 'run waits for free slots',
    );
    if (token !== undefined) await job.moveToDelayed(Date.now() + delay, token);
    throw new DelayedError();
  }

  /**
   * Catch-all for failures no processor recorded (a run that stalled too often fails inside
   * BullMQ): once the job is failed for good, make sure failure.json exists.
   */
  private async recordFinalFailure(job: Job<RunJobData, RunReturn>, error: Error): Promise<void> {
    try {
      if (!(await job.isFailed())) return;
      const runDir = dirname(resolveInsideArtifacts(this.options.artifactsDir, job.data.manifest));
      await writeFailureRecordIfMissing(outputDirOf(runDir), {
        run_id: job.data.run_id,
        kind: kindFromReason(error.message),
        message: error.message,
        attempts: job.attemptsMade,
        time: new Date().toISOString(),
      });
    } catch (err) {
      log.debug({ err, run: job.id }, 'could not record failure');
    }
  }

  /** Keep `work` in `set` until it settles. */
  private track<T>(set: Set<Promise<unknown>>, work: Promise<T>): Promise<T> {
    // `held` never rejects: the caller handles `work`'s own rejection.
    const held: Promise<unknown> = work.then(
      () => set.delete(held),
      () => set.delete(held),
    );
    set.add(held);
    return work;
  }

  /**
   * Stop taking jobs, ask every trainer to checkpoint and exit, put their jobs back in the queue,
   * and close. Resolves within stopGraceMs + SHUTDOWN_MARGIN_MS, whatever Redis does.
   */
  shutdown(): Promise<ShutdownReport> {
    this.closing ??= this.doShutdown();
    return this.closing;
  }

  private async doShutdown(): Promise<ShutdownReport> {
    const t0 = Date.now();
    this.stopping = true;
    // Not BullMQ's close() yet: its graceful form waits for the blocking connection's 'end' event,
    // which ioredis never emits for a connection that is reconnecting (Redis unreachable), and a
    // later close(true) returns that same pending promise. pause(true) only stops the fetching.
    const workers = [...this.runWorkers, ...(this.auditWorker ? [this.auditWorker] : [])];
    await Promise.all(workers.map((w) => w.pause(true)));
    for (const worker of this.runWorkers) worker.cancelAllJobs(ABORT_SHUTDOWN);
    // The trainers checkpoint and exit; run-trainer.ts sends SIGKILL at the end of the grace.
    await within(Promise.allSettled(this.trainers), this.options.tuning.stopGraceMs + TRAINER_REAP_MS);
    let forced = await redisSilence(this.client, REDIS_PROBE_MS);
    if (forced === null && !(await within(Promise.allSettled(this.processing), HANDBACK_MS)))
      forced = `runs not handed back within ${HANDBACK_MS / 1000} s`;
    const notHandedBack = this.activeRuns();
    if (forced === null) {
      // BullMQ's graceful close hangs on a connection that is reconnecting (see above): bounded.
      const closed = await within(
        Promise.all([...workers.map((w) => w.close()), this.runsQueue?.close(), this.heartbeat.stop()]),
        CLOSE_MS,
      );
      if (!closed) forced = `connections not closed within ${CLOSE_MS / 1000} s`;
    }
    if (forced !== null) {
      log.warn(
        { why: forced, runs: notHandedBack, lock_ms: this.options.tuning.lockMs },
        'shutdown: connections force-closed; runs not handed back return to the queue when their lock expires',
      );
      this.forceClose();
    }
    this.subscriber.disconnect();
    this.client.disconnect();
    return { ms: Date.now() - t0, forced, notHandedBack };
  }

  /** Drop every connection now, without waiting for Redis (ioredis stops reconnecting too). */
  private forceClose(): void {
    const drop = (closing: Promise<unknown> | undefined) => void closing?.catch(() => undefined);
    const workers = [...this.runWorkers, ...(this.auditWorker ? [this.auditWorker] : [])];
    // close(true) disconnects both of a worker's connections at once unless a close already began.
    for (const worker of workers) drop(worker.close(true));
    for (const worker of workers) drop(worker.disconnect());
    drop(this.runsQueue?.disconnect());
    drop(this.heartbeat.stop());
  }
}

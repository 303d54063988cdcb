import type { ProgressEvent } from '../contracts/progress.js';
import { waitHolder } from '../queue/base-wait.js';
import type { RunProgress } from '../queue/job-data.js';

/**
 * Folds trainer events into the job's progress record and decides what is worth writing to Redis:
 * step events arrive many times a second on a fast GPU, so they are throttled; every other event
 * (started, wait, checkpoint, eval, done, error) is written at once and logged.
 */
export interface TrackerLimits {
  /** Minimum ms between progress writes caused by step events. */
  progressMs: number;
  /** Minimum ms between job.log lines for step events. */
  stepLogMs: number;
}

export interface TrackerOutput {
  /** Write job.updateProgress(progress) now. */
  write: boolean;
  /** A job.log line, when this event deserves one. */
  log: string | null;
}

export class ProgressTracker {
  readonly progress: RunProgress;
  private lastWrite = Number.NEGATIVE_INFINITY;
  private lastStepLog = Number.NEGATIVE_INFINITY;
  /**
   * First step seen in this attempt and phase, for the rate behind the ETA. Pretraining and
   * fine-tuning steps differ in size (batch, rows), so each phase measures its own rate.
   */
  private rateStart: { phase: RunProgress['phase']; update: number; t: number } | null = null;
  /** First eval event of the current eval phase (wall ms), for the ETA while evaluating. */
  private evalStart: { phase: string; done: number; t: number } | null = null;
  /** Wall ms up to which `progress.phase_s` counts. */
  private clock: number;
  /**
   * Whether the trainer announced training (`started`). A trainer that finds its output folder's
   * result.json complete for this manifest once it holds the folder lock emits `done` alone.
   */
  trained = false;

  constructor(
    base: Omit<
      RunProgress,
      | 'phase'
      | 'update'
      | 'total'
      | 'loss'
      | 'rows_per_s'
      | 'eta_s'
      | 'resumed_from'
      | 'last_checkpoint'
      | 'eval'
      | 'waiting'
      | 'phase_s'
      | 'updated'
      | 'device'
      | 'trainer_pid'
    >,
    private readonly limits: TrackerLimits,
    now: number = Date.now(),
  ) {
    this.progress = {
      ...base,
      phase: 'starting',
      trainer_pid: null,
      device: null,
      update: 0,
      total: null,
      loss: null,
      rows_per_s: null,
      eta_s: null,
      resumed_from: null,
      last_checkpoint: null,
      eval: null,
      waiting: null,
      phase_s: {},
      updated: now,
    };
    this.clock = now;
  }

  /** Charge the wall time since the last event to the phase the run was in (the audit ETA reads it). */
  private tick(now: number): void {
    const p = this.progress;
    const dt = Math.max(0, now - this.clock) / 1000;
    if (dt > 0) {
      const spent = (p.phase_s ??= {});
      spent[p.phase] = Math.round(((spent[p.phase] ?? 0) + dt) * 1000) / 1000;
    }
    this.clock = Math.max(this.clock, now);
  }

  apply(event: ProgressEvent, now: number = Date.now()): TrackerOutput {
    const p = this.progress;
    this.tick(now);
    p.updated = now;
    switch (event.event) {
      case 'started':
        this.trained = true;
        p.phase = 'training';
        p.trainer_pid = event.pid;
        p.device = event.device;
        p.total = event.total_updates;
        p.resumed_from = event.resumed_from;
        p.update = event.resumed_from ?? 0;
        this.rateStart = null;
        return this.urgent(
          now,
          `started pid=${event.pid} device=${event.device} backend=${event.backend} updates=${event.total_updates}` +
            (event.resumed_from !== null ? ` resumed_from=${event.resumed_from}` : '') +
            // A corrupt or truncated checkpoint is never resumed from silently.
            (event.checkpoints_skipped ?? [])
              .map(
                (s) =>
                  `; warning: checkpoint update ${s.update} not resumed from: ${s.reason}${event.resumed_from === null ? ' (started from scratch)' : ''}`,
              )
              .join(''),
        );
      case 'step': {
        const phase = event.phase === 'pretrain' ? 'pretraining' : 'training';
        const switched = p.phase !== phase;
        p.phase = phase;
        p.update = event.update;
        p.total = event.total;
        p.loss = event.loss;
        p.rows_per_s = event.rows_per_s;
        // Rate from this attempt's own steps in this phase (event times, seconds): resumed runs,
        // warm-up outliers and the other phase do not distort it for long. During pretraining the
        // ETA is that of pretraining alone.
        if (this.rateStart === null || this.rateStart.phase !== phase)
          this.rateStart = { phase, update: event.update, t: event.t };
        const du = event.update - this.rateStart.update;
        const dt = event.t - this.rateStart.t;
        p.eta_s = du > 0 && dt > 0 ? Math.max(0, ((event.total - event.update) * dt) / du) : null;
        let log: string | null = null;
        if (switched || now - this.lastStepLog >= this.limits.stepLogMs || event.update === event.total) {
          this.lastStepLog = now;
          const what = phase === 'pretraining' ? 'pretrain step' : 'step';
          log = `${what} ${event.update}/${event.total} loss=${event.loss.toFixed(4)} rows/s=${event.rows_per_s.toFixed(1)}`;
        }
        // A phase change is written at once, so status never shows one phase's counts under the other.
        const write = switched || now - this.lastWrite >= this.limits.progressMs || event.update === event.total;
        if (write) this.lastWrite = now;
        return { write, log };
      }
      case 'wait':
        if (event.ended) {
          // The base is there (or this trainer builds it): back where `started` left the run.
          const since = p.waiting?.since;
          p.phase = 'training';
          p.waiting = null;
          return this.urgent(
            now,
            `base model ready after waiting ${(event.waited_s ?? (since !== undefined ? (now - since) / 1000 : 0)).toFixed(1)} s`,
          );
        }
        p.phase = 'waiting_base';
        p.waiting = {
          on: event.on,
          run_id: event.holder_run ?? null,
          pid: event.holder_pid ?? null,
          since: p.waiting?.since ?? now,
        };
        // Nothing of this run's own work is measured while it waits; the audit ETA adds the builder's.
        p.eta_s = null;
        return this.urgent(now, `waiting for the base model, built by ${waitHolder(p.waiting)}`);
      case 'checkpoint':
        p.last_checkpoint = event.update;
        return this.urgent(now, `checkpoint update=${event.update} ${event.path}`);
      case 'eval':
        p.phase = 'evaluating';
        p.eval = { phase: event.phase, done: event.done, total: event.total };
        // ETA of this eval phase from its own pace (wall time: eval events carry no clock).
        if (this.evalStart === null || this.evalStart.phase !== event.phase || event.done < this.evalStart.done) {
          this.evalStart = { phase: event.phase, done: event.done, t: now };
        }
        {
          const dd = event.done - this.evalStart.done;
          const dt = (now - this.evalStart.t) / 1000;
          p.eta_s = dd > 0 && dt > 0 ? Math.max(0, ((event.total - event.done) * dt) / dd) : null;
        }
        return this.urgent(
          now,
          event.done === 0 || event.done === event.total ? `eval ${event.phase} ${event.done}/${event.total}` : null,
        );
      case 'done':
        p.phase = 'finishing';
        p.eta_s = 0;
        return this.urgent(now, `done wall_s=${event.wall_s.toFixed(1)} result=${event.result}`);
      case 'error':
        return this.urgent(now, `error ${event.kind}${event.recoverable ? ' (recoverable)' : ''}: ${event.message}`);
    }
  }

  /** Mark a phase change the worker itself causes (e.g. stopping). */
  setPhase(phase: RunProgress['phase'], now: number = Date.now()): void {
    this.tick(now);
    this.progress.phase = phase;
    this.progress.updated = now;
  }

  private urgent(now: number, log: string | null): TrackerOutput {
    this.lastWrite = now;
    return { write: true, log };
  }
}

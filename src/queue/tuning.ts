import { UserInputError, quoteValue } from '../errors.js';

/**
 * Timing knobs of the queue. Production defaults are safe for runs that last hours: the trainer is
 * a child process, so the worker's event loop is idle and renews its lock every lockMs/2 even while
 * a GPU is saturated. Tests shrink them (through the same environment variables) to finish fast.
 */
export interface QueueTuning {
  /** Job lock time-to-live in ms; a worker that stops renewing (killed, frozen) loses the job after this. Default 30000. Env CANARY_AUDIT_LOCK_MS. */
  lockMs: number;
  /** How often any worker looks for jobs whose lock expired, in ms. Default 30000. Env CANARY_AUDIT_STALLED_MS. */
  stalledMs: number;
  /** Times a run may be recovered from a dead worker before it fails for good. Default 3. Env CANARY_AUDIT_MAX_STALLED. */
  maxStalled: number;
  /** Attempts per run for retryable failures (trainer exit 1). Default 3. Env CANARY_AUDIT_ATTEMPTS. */
  attempts: number;
  /** First retry delay in ms, doubled at each further attempt. Default 60000. Env CANARY_AUDIT_BACKOFF_MS. */
  backoffMs: number;
  /** After SIGTERM (worker shutdown, cancel) the trainer has this long to checkpoint before SIGKILL, in ms. Default 120000. Env CANARY_AUDIT_STOP_GRACE_MS. */
  stopGraceMs: number;
  /** Minimum ms between job.updateProgress writes for step events. Default 2000. Env CANARY_AUDIT_PROGRESS_MS. */
  progressMs: number;
  /** Minimum ms between job.log lines for step events (other events are always logged). Default 30000. Env CANARY_AUDIT_STEP_LOG_MS. */
  stepLogMs: number;
  /** Seconds an idle worker blocks on Redis waiting for a job; bounds how fast close() returns when idle. Default 5. Env CANARY_AUDIT_DRAIN_S. */
  drainDelayS: number;
}

export const DEFAULT_TUNING: QueueTuning = {
  lockMs: 30_000,
  stalledMs: 30_000,
  maxStalled: 3,
  attempts: 3,
  backoffMs: 60_000,
  stopGraceMs: 120_000,
  progressMs: 2_000,
  stepLogMs: 30_000,
  drainDelayS: 5,
};

const ENV: Record<keyof QueueTuning, [string, number]> = {
  lockMs: ['CANARY_AUDIT_LOCK_MS', 100],
  stalledMs: ['CANARY_AUDIT_STALLED_MS', 100],
  maxStalled: ['CANARY_AUDIT_MAX_STALLED', 0],
  attempts: ['CANARY_AUDIT_ATTEMPTS', 1],
  backoffMs: ['CANARY_AUDIT_BACKOFF_MS', 0],
  stopGraceMs: ['CANARY_AUDIT_STOP_GRACE_MS', 0],
  progressMs: ['CANARY_AUDIT_PROGRESS_MS', 0],
  stepLogMs: ['CANARY_AUDIT_STEP_LOG_MS', 0],
  drainDelayS: ['CANARY_AUDIT_DRAIN_S', 1],
};

/** Defaults, overridden by the environment, overridden by explicit values (CLI flags). */
export function resolveTuning(overrides: Partial<QueueTuning> = {}, env: NodeJS.ProcessEnv = process.env): QueueTuning {
  const tuning: QueueTuning = { ...DEFAULT_TUNING };
  for (const key of Object.keys(ENV) as (keyof QueueTuning)[]) {
    const [name, min] = ENV[key];
    const raw = env[name];
    if (raw !== undefined && raw !== '') tuning[key] = parseIntAtLeast(raw, min, name);
    const explicit = overrides[key];
    if (explicit !== undefined) tuning[key] = explicit;
  }
  return tuning;
}

function parseIntAtLeast(raw: string, min: number, name: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) {
    throw new UserInputError(`${name} must be an integer >= ${min}, got ${quoteValue(raw)}`, {
      field: name,
      code: 'E_BAD_ENV',
    });
  }
  return n;
}

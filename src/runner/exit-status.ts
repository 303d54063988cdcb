import { TRAINER_EXIT, type ErrorEvent } from '../contracts/progress.js';

/**
 * What a trainer exit means for the queue. The trainer's exit code is the contract
 * (src/contracts/progress.ts TRAINER_EXIT); the error event, when there is one, adds the message.
 *   ok           the run finished; result.json is written
 *   retry        a crash that another attempt may not repeat: retry with backoff
 *   final        retrying cannot help (bad input, divergence, missing model, OOM, broken image)
 *   interrupted  stopped on request (SIGTERM) after a checkpoint: resume later with --resume
 *   busy         another live trainer holds the output folder; nothing was done: try again later
 */
export type ExitOutcome = 'ok' | 'retry' | 'final' | 'interrupted' | 'busy';

export interface ExitStatus {
  outcome: ExitOutcome;
  /** Short machine-readable reason: failure.json's `kind`. */
  kind: string;
  message: string;
}

export interface ExitFacts {
  exitCode: number | null;
  signal: string | null;
  /** True when the worker asked the trainer to stop (shutdown or cancel). */
  stopRequested: boolean;
  lastError: ErrorEvent | null;
  sawDone: boolean;
  /** Last lines of the trainer's stderr, for messages when no error event explains the exit. */
  stderrTail: string;
  /** A spawn failure (executable missing), when the process never ran. */
  spawnError?: string;
}

const FINAL_CODES: Record<number, string> = {
  [TRAINER_EXIT.BAD_INPUT]: 'bad_input',
  [TRAINER_EXIT.DIVERGED]: 'diverged',
  [TRAINER_EXIT.MISSING_MODEL]: 'missing_model',
  [TRAINER_EXIT.OOM]: 'oom',
  // docker run: 126 = image command cannot run, 127 = not found. The image is wrong: final.
  126: 'bad_image',
  127: 'bad_image',
};

export function classifyExit(facts: ExitFacts): ExitStatus {
  const detail = facts.lastError?.message ?? (facts.stderrTail || undefined);
  const say = (fallback: string) => detail ?? fallback;
  if (facts.spawnError !== undefined) {
    return { outcome: 'final', kind: 'missing_dependency', message: facts.spawnError };
  }
  const code = facts.exitCode;
  if (code === TRAINER_EXIT.OK) {
    if (facts.sawDone) return { outcome: 'ok', kind: 'ok', message: 'done' };
    // Exit 0 without a done event breaks the protocol; another attempt resumes from a checkpoint.
    return { outcome: 'retry', kind: 'protocol', message: 'trainer exited 0 without a "done" event' };
  }
  if (code === TRAINER_EXIT.INTERRUPTED) {
    return { outcome: 'interrupted', kind: 'interrupted', message: say('trainer interrupted (exit 75); resumable') };
  }
  if (code === TRAINER_EXIT.BUSY) {
    return { outcome: 'busy', kind: 'folder_busy', message: say('another trainer holds the output folder (exit 6)') };
  }
  if (code !== null && FINAL_CODES[code] !== undefined) {
    return { outcome: 'final', kind: facts.lastError?.kind ?? FINAL_CODES[code], message: say(`trainer exit ${code}`) };
  }
  if (code === null && facts.stopRequested) {
    // Killed after the grace period: the newest checkpoint on disk is where the next attempt resumes.
    return {
      outcome: 'interrupted',
      kind: 'interrupted',
      message: `trainer killed by ${facts.signal ?? 'signal'} after the stop grace period`,
    };
  }
  if (code === null) {
    // The signal is the reason; the last output line only gives context.
    const killed = `trainer killed by ${facts.signal ?? 'a signal'} (out of host memory?)`;
    return { outcome: 'retry', kind: 'killed', message: detail ? `${killed}; last output: ${detail}` : killed };
  }
  if (facts.lastError && !facts.lastError.recoverable) {
    return { outcome: 'final', kind: facts.lastError.kind, message: facts.lastError.message };
  }
  return { outcome: 'retry', kind: facts.lastError?.kind ?? 'crash', message: say(`trainer exit ${code}`) };
}

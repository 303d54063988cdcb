import type { DecodeMode, Probe, ProbeKind } from '../contracts/index.js';
import type { CanaryPool, PoolCanary } from './canaries.js';
import { probeDisplayCue, REDACTED_PLACEHOLDER, type CueEncoding } from '../codes/index.js';
import type { Task, TaskSpec } from './tasks/index.js';

/**
 * Evaluation prompts for one canary. Each is the canary's training input with the code's place
 * filled per kind, and the prefill is the target up to the code:
 *  - hidden: the code redacted (the placeholder), whatever training showed;
 *  - supplied: the true code shown the way training showed it (verbatim when training redacted it);
 *  - substituted: the canary's substitute code, shown the same way.
 */
export interface ProbeOptions {
  kinds: readonly ProbeKind[];
  decode: readonly DecodeMode[];
}

export function canaryProbes(
  pool: CanaryPool,
  task: Task,
  taskSpec: TaskSpec,
  cue: CueEncoding,
  canary: PoolCanary,
  options: ProbeOptions,
): Probe[] {
  const identity = pool.identity(task, canary.id);
  const message = pool.message(task, taskSpec, canary.id);
  const display = probeDisplayCue(cue);
  return options.kinds.map((kind) => {
    const shown = kind === 'hidden' ? null : kind === 'supplied' ? canary.code : canary.substitute;
    const cueText = shown === null ? REDACTED_PLACEHOLDER : display.encode(shown);
    const example = task.canary(
      identity.value,
      message,
      cueText,
      canary.code,
      shown === null ? null : display.visibility,
    );
    return {
      id: `${canary.id}.${kind}`,
      canary_id: canary.id,
      kind,
      shown_code: shown,
      prompt: example.prompt,
      prefill: example.prefill,
      decode: [...options.decode],
    };
  });
}

/**
 * Exact recovery and copying, read from the trainer's greedy outputs. A decode mode that was not
 * run is `null` (not measured), never `false`: absence of evidence is not a failed extraction.
 */
export interface GreedyOutcome {
  /** The code read from the greedy output, or null when the output held none. */
  code: string | null;
}

/** Greedy decoding produced exactly the true code. */
export function exactRecovery(greedy: GreedyOutcome | undefined, trueCode: string): boolean | null {
  if (greedy === undefined) return null;
  return greedy.code !== null && greedy.code === trueCode;
}

/**
 * Substituted probes show a different code in the prompt: reproducing it is copying (the model
 * follows its input), producing the original is recall. Null when the mode was not run or the
 * probe shows no code.
 */
export function copiedShownCode(greedy: GreedyOutcome | undefined, shownCode: string | null): boolean | null {
  if (greedy === undefined || shownCode === null) return null;
  return greedy.code !== null && greedy.code === shownCode;
}

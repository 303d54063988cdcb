import type { SequentialProgress } from './job-data.js';

/** `seed 5 of ≤10: 2 comparisons undecided` (sequential replicates; `, done` once every comparison stopped). */
export function sequentialStatus(s: SequentialProgress): string {
  const open = `${s.undecided} comparison${s.undecided === 1 ? '' : 's'} undecided`;
  // Not done with none open: no look has been read yet.
  if (!s.done && s.undecided === 0) return `seed ${s.seeds} of ≤${s.max}: first look`;
  return `seed ${s.seeds} of ≤${s.max}: ${s.done ? `done, ${s.decided} decided, ${open}` : open}`;
}

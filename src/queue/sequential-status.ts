import type { Look, SequentialRecord } from '../contracts/sequential.js';
import type { SequentialProgress } from './job-data.js';

/** `seed 5 of ≤10: 2 comparisons undecided` (sequential replicates; `, done` once every comparison stopped). */
export function sequentialStatus(s: SequentialProgress): string {
  const open = `${s.undecided} comparison${s.undecided === 1 ? '' : 's'} undecided`;
  // Not done with none open: no look has been read yet.
  if (!s.done && s.undecided === 0) return `seed ${s.seeds} of ≤${s.max}: first look`;
  return `seed ${s.seeds} of ≤${s.max}: ${s.done ? `done, ${s.decided} decided, ${open}` : open}`;
}

/** Where the looks stand, for the audit parent (status, dashboard). */
export function progressOf(record: SequentialRecord, familySize: number | null): SequentialProgress {
  const last = record.looks.at(-1);
  const lookNo = record.pending_look ?? last?.look ?? 1;
  const look = record.schedule[lookNo - 1] as Look;
  const decided = record.stopped.filter((s) => s.reason === 'decided').length;
  const undecided = last ? last.open.length : (familySize ?? 0);
  return {
    look: lookNo,
    seeds: look.seeds,
    max: record.max,
    undecided: record.done ? record.stopped.filter((s) => s.reason === 'max').length : undecided,
    decided,
    done: record.done,
  };
}

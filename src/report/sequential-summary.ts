import type { SequentialRecord } from '../contracts/index.js';
import type { LookRecord, SpendingFunction, StopReason } from '../metrics/sequential.js';
import type { ComparisonVerdict } from './verdicts.js';

/**
 * What summary.json says of an audit with sequential replicates: the looks (seeds, the α each
 * spent and tested by itself, which comparisons stayed open and which stopped) and, per declared
 * comparison, why it stopped. Its verdicts are the ones read at each comparison's stopping look
 * (interval at 1 − that look's α, Holm over the comparisons open at it), not a reading of all the
 * runs at the report's level: that one would ignore the looks taken (metrics/sequential.ts).
 */
export interface SequentialSummary {
  min: number;
  max: number;
  spending: SpendingFunction;
  /** The family's level over all looks. */
  alpha: number;
  done: boolean;
  looks: LookRecord[];
  comparisons: {
    comparison: string;
    /** decided at `look`, `max` reached, or `open` (the looks are not finished). */
    reason: StopReason | 'open';
    look: number | null;
    seeds: number | null;
    /** The stopping look's own α (the verdict's level); null while open. */
    alpha: number | null;
  }[];
}

export function sequentialSummary(
  record: SequentialRecord,
  fixed: readonly ComparisonVerdict[],
): { sequential: SequentialSummary; verdicts: ComparisonVerdict[] } {
  const stopped = new Map(record.stopped.map((s) => [s.comparison, s]));
  const lastLook = record.looks.at(-1)?.look ?? 0;
  const verdicts = fixed.map((v) => {
    const s = stopped.get(v.comparison);
    if (s?.detail) return s.detail as ComparisonVerdict;
    return {
      ...v,
      sentence: v.sentence.replace(
        /\.$/,
        `; sequential: still open after look ${lastLook} of ${record.schedule.length} (read here over the runs so far at the report's level, not a sequential verdict).`,
      ),
    };
  });
  const named = new Set(fixed.map((v) => v.comparison));
  for (const s of record.stopped)
    if (!named.has(s.comparison) && s.detail) verdicts.push(s.detail as ComparisonVerdict);
  const comparisons = verdicts.map((v) => {
    const s = stopped.get(v.comparison);
    return s
      ? { comparison: v.comparison, reason: s.reason, look: s.look, seeds: s.seeds, alpha: s.alpha }
      : { comparison: v.comparison, reason: 'open' as const, look: null, seeds: null, alpha: null };
  });
  return {
    sequential: {
      min: record.min,
      max: record.max,
      spending: record.spending,
      alpha: record.alpha,
      done: record.done,
      looks: record.looks,
      comparisons,
    },
    verdicts,
  };
}

import { normalCdf } from './gaussian.js';
import { normalQuantile } from './wilson.js';
import type {
  Look,
  LookReading,
  LookRecord,
  SpendingFunction,
  StopReason,
  StoppedComparison,
} from '../contracts/sequential.js';

export type { Look, LookReading, LookRecord, SpendingFunction, StopReason, StoppedComparison };

/**
 * Sequential replicates (`replicates: {until: decided, min, max}`): the audit looks at its declared
 * comparisons after `min` seeds per cell, then after each added seed up to `max`, and stops each
 * comparison once it is decided (higher, lower or equivalent) or at `max`.
 *
 * Error control is by alpha spending (Lan & DeMets 1983) with each look's increment tested by
 * itself: a spending function f(t), increasing from f(0) = 0 to f(1) = α over the information
 * fraction t = seeds / max, gives look k the level α_k = f(t_k) − f(t_{k−1}) (the first look
 * f(t_1)). At look k the family's open comparisons are read at α_k — Holm over them, intervals at
 * 1 − α_k, TOST at α_k — and a comparison decided there stops with that verdict and that interval.
 * By the union bound over looks, P(some look rejects a true null) ≤ Σ α_k = α whatever the
 * dependence between looks, so the family-wise error of the verdicts stays ≤ α under this optional
 * stopping, and the interval a comparison reports (the one of its stopping look, level 1 − α_k)
 * misses the truth with probability ≤ Σ α_k = α. It is conservative (Bonferroni over looks, not
 * the exact group-sequential boundaries, which need the correlation of the looks' statistics and
 * normal ones; these are studentised with few runs); bench/sequential.ts measures how conservative.
 *
 * Spending functions (α the family level, t in (0, 1]):
 * - `pocock`: f(t) = α · ln(1 + (e − 1) t) — spends much at the first looks, where a large effect
 *   decides with few seeds (the default: seeds are expensive, and min is rarely small);
 * - `obrien-fleming`: f(t) = 2 − 2Φ(z_{1−α/2} / √t) — spends almost nothing early and keeps most
 *   for the last look, the fixed design's power at max when effects are small.
 */

export const SPENDING_FUNCTIONS: readonly SpendingFunction[] = ['pocock', 'obrien-fleming'];
export const DEFAULT_SPENDING: SpendingFunction = 'pocock';

/** α spent up to information fraction t (0 ≤ t ≤ 1) at family level α. */
export function spentAlpha(spending: SpendingFunction, t: number, alpha: number): number {
  if (!(alpha > 0 && alpha < 1)) throw new RangeError(`alpha must be in (0, 1), got ${alpha}`);
  if (!(t >= 0 && t <= 1)) throw new RangeError(`information fraction must be in [0, 1], got ${t}`);
  if (t === 0) return 0;
  if (spending === 'pocock') return alpha * Math.log(1 + (Math.E - 1) * t);
  return Math.min(alpha, 2 - 2 * normalCdf(normalQuantile(1 - alpha / 2) / Math.sqrt(t)));
}

export interface SequentialDesign {
  /** Seeds per cell at the first look (≥ 2: one run per arm has no run-to-run spread to test with). */
  min: number;
  /** Seeds per cell at most: the last look. */
  max: number;
  spending: SpendingFunction;
  /** The family's level over all looks (1 − the report's confidence). */
  alpha: number;
}

/** The looks of a design: at min, min + 1, …, max seeds, each with its spent and own α. */
export function lookSchedule(d: SequentialDesign): Look[] {
  if (!(Number.isInteger(d.min) && Number.isInteger(d.max) && d.min >= 2 && d.max >= d.min))
    throw new RangeError(`need integers 2 ≤ min ≤ max, got min ${d.min}, max ${d.max}`);
  const out: Look[] = [];
  let before = 0;
  for (let seeds = d.min; seeds <= d.max; seeds += 1) {
    const fraction = seeds / d.max;
    // The last look spends exactly α (no rounding left on the table).
    const spent = seeds === d.max ? d.alpha : spentAlpha(d.spending, fraction, d.alpha);
    out.push({ look: out.length + 1, seeds, fraction, spent, alpha: spent - before });
    before = spent;
  }
  return out;
}

export interface SequentialState {
  looks: LookRecord[];
  stopped: StoppedComparison[];
  /** Arms that get the next seed: those an open comparison rests on. Empty when done. */
  next_arms: string[];
  done: boolean;
}

export const EMPTY_STATE: SequentialState = { looks: [], stopped: [], next_arms: [], done: false };

/**
 * Apply one look's readings: an open comparison stops when decided, or at the last look; the next
 * look adds a seed to the arms of the comparisons still open. Readings of comparisons that already
 * stopped are ignored (their verdict stands as read at their stopping look). A comparison the look
 * could not read (absent from `readings`) stays open until the last look.
 */
export function applyLook(
  state: SequentialState,
  look: Look,
  readings: readonly LookReading[],
  schedule: readonly Look[],
): SequentialState {
  const last = look.look === schedule.length;
  const already = new Set(state.stopped.map((s) => s.comparison));
  const stopped: StoppedComparison[] = [];
  const open: LookReading[] = [];
  for (const r of readings) {
    if (already.has(r.comparison)) continue;
    if (r.verdict !== 'undecided')
      stopped.push({ ...r, reason: 'decided', look: look.look, seeds: look.seeds, alpha: look.alpha });
    else if (last) stopped.push({ ...r, reason: 'max', look: look.look, seeds: look.seeds, alpha: look.alpha });
    else open.push(r);
  }
  const nextArms = last ? [] : [...new Set(open.flatMap((r) => r.arms))].sort();
  return {
    looks: [
      ...state.looks,
      {
        look: look.look,
        seeds: look.seeds,
        alpha: look.alpha,
        spent: look.spent,
        open: open.map((r) => r.comparison),
        stopped: stopped.map((s) => s.comparison),
      },
    ],
    stopped: [...state.stopped, ...stopped],
    next_arms: nextArms,
    done: last || open.length === 0,
  };
}

/** `look 2: seed 4 of ≤10 — 2 comparisons undecided, 1 decided (stopped)` */
export function lookLine(record: LookRecord, max: number, decidedSoFar: number): string {
  const n = record.open.length;
  return `look ${record.look}: seed ${record.seeds} of ≤${max} — ${n} comparison${n === 1 ? '' : 's'} undecided, ${decidedSoFar} decided (stopped)`;
}

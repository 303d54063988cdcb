import { derivedSeed, Rng } from '../random.js';
import { median, quantileSorted } from './statistics.js';

/**
 * Percentile-bootstrap confidence intervals for medians. Resampling is seeded: the same data, seed
 * and label always give the same interval, so a report can be regenerated and diffed.
 */
export interface BootstrapOptions {
  /** Report seed. */
  seed: number;
  /** Distinguishes independent intervals computed under one seed (e.g. a group key). */
  label: string;
  /** Bootstrap resamples. Default 2000. */
  resamples?: number;
  /** Two-sided confidence level. Default 0.95. */
  confidence?: number;
}

export interface MedianInterval {
  /** Median of the sample itself (not of the resamples). */
  estimate: number;
  lo: number;
  hi: number;
  n: number;
}

export interface DifferenceInterval {
  /** median(a) − median(b). */
  estimate: number;
  lo: number;
  hi: number;
  n_a: number;
  n_b: number;
}

export const DEFAULT_RESAMPLES = 2000;
export const DEFAULT_CONFIDENCE = 0.95;

function settings(options: BootstrapOptions): { resamples: number; alpha: number } {
  const resamples = options.resamples ?? DEFAULT_RESAMPLES;
  const confidence = options.confidence ?? DEFAULT_CONFIDENCE;
  if (!Number.isInteger(resamples) || resamples < 1) throw new RangeError(`resamples must be an integer >= 1, got ${resamples}`);
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`confidence must be in (0, 1), got ${confidence}`);
  return { resamples, alpha: 1 - confidence };
}

/** Median of a resample of `values` drawn with replacement, using `scratch` as workspace. */
function resampledMedian(values: ArrayLike<number>, scratch: Float64Array, rng: Rng): number {
  const n = values.length;
  for (let i = 0; i < n; i += 1) scratch[i] = values[rng.scaledInt(n)] as number;
  scratch.sort();
  return quantileSorted(scratch, 0.5);
}

/** Median with a percentile-bootstrap interval; null for an empty sample. */
export function bootstrapMedian(values: ArrayLike<number>, options: BootstrapOptions): MedianInterval | null {
  const n = values.length;
  if (n === 0) return null;
  const { resamples, alpha } = settings(options);
  const estimate = median(values);
  const rng = Rng.fromSeed(derivedSeed(options.seed, options.label));
  const scratch = new Float64Array(n);
  const stats = new Float64Array(resamples);
  for (let b = 0; b < resamples; b += 1) stats[b] = resampledMedian(values, scratch, rng);
  stats.sort();
  return { estimate, lo: quantileSorted(stats, alpha / 2), hi: quantileSorted(stats, 1 - alpha / 2), n };
}

/**
 * median(a) − median(b) for two independent samples (focal canaries against a control arm), each
 * resampled on its own; null when either is empty.
 */
export function bootstrapMedianDifference(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  options: BootstrapOptions,
): DifferenceInterval | null {
  if (a.length === 0 || b.length === 0) return null;
  const { resamples, alpha } = settings(options);
  const estimate = median(a) - median(b);
  const rng = Rng.fromSeed(derivedSeed(options.seed, options.label));
  const scratchA = new Float64Array(a.length);
  const scratchB = new Float64Array(b.length);
  const stats = new Float64Array(resamples);
  for (let i = 0; i < resamples; i += 1) {
    stats[i] = resampledMedian(a, scratchA, rng) - resampledMedian(b, scratchB, rng);
  }
  stats.sort();
  return {
    estimate,
    lo: quantileSorted(stats, alpha / 2),
    hi: quantileSorted(stats, 1 - alpha / 2),
    n_a: a.length,
    n_b: b.length,
  };
}

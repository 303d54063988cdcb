import type { ClusteredSample } from './clustered-sample.js';
import { designProportion } from './design-proportion.js';

/**
 * A median's interval read off the ranks (test inversion; Woodruff 1952 for clustered samples):
 * the population median m is at least v when more than half the population lies at or above v,
 * and at most v when more than half lies at or below it. So
 *   lo = the largest observed v whose share P(X ≥ v) has a lower confidence bound above 1/2,
 *   hi = the smallest observed v whose share P(X ≤ v) has a lower confidence bound above 1/2,
 * each share's bound one-sided at α/2 from `designProportion` (Wilson at the design's effective n,
 * t(df): it respects runs and canaries as the exposure medians do), and the parameter space's
 * bound where no observed value qualifies (the sample's extreme when the space is unbounded).
 *
 * Why: exposure is discrete and piles up at its ceiling (rank 1) and floor. When the median sits
 * on such a pile, nearly every resample's median is the same value, the bootstrap variance
 * collapses, and estimate ± t·se is far too narrow (85% coverage with 46% of the values at the
 * ceiling, docs/metrics.md). The ranks do not collapse: the share at or above a value is
 * estimated as well with ties as without, and the interval is as lopsided as the data.
 */
export function rankInterval(
  s: ClusteredSample,
  alpha: number,
  bounds: readonly [number, number],
): { lo: number; hi: number } {
  const n = s.values.length;
  const runIds = new Array<string>(n);
  const unitIds = new Array<string>(n);
  for (let c = 0; c + 1 < s.offsets.length; c += 1) {
    for (let i = s.offsets[c] as number; i < (s.offsets[c + 1] as number); i += 1) {
      runIds[i] = String(c);
      unitIds[i] = s.units ? String(s.units[i]) : `${c}:${i}`;
    }
  }
  const distinct = [...new Set(s.values)].sort((a, b) => a - b);
  const confidence = 1 - 2 * (alpha / 2);
  // A two-sided (1 − α) interval's lower end is a one-sided α/2 bound.
  const lowerBound = (flags: boolean[]): number =>
    (designProportion(flags, runIds, unitIds, confidence) as { lo: number }).lo;
  let lo = Number.isFinite(bounds[0]) ? bounds[0] : (distinct[0] as number);
  for (let j = distinct.length - 1; j >= 0; j -= 1) {
    const v = distinct[j] as number;
    if (lowerBound(Array.from(s.values, (x) => x >= v)) > 0.5) {
      lo = v;
      break;
    }
  }
  let hi = Number.isFinite(bounds[1]) ? bounds[1] : (distinct[distinct.length - 1] as number);
  for (let j = 0; j < distinct.length; j += 1) {
    const v = distinct[j] as number;
    if (lowerBound(Array.from(s.values, (x) => x <= v)) > 0.5) {
      hi = v;
      break;
    }
  }
  return { lo, hi };
}

/**
 * The share of a sample tied at one end of its parameter space (exposure 0 or log2|C|) where the
 * median can land: the largest block of equal values at `bounds[0]` or `bounds[1]` that reaches
 * into the sample's middle half. 0.47 when 47% of the exposures sit at the ceiling and the median
 * is near it; 0 for continuous data, or when the pile lies in a tail the median cannot reach.
 */
export function boundTieShare(values: ArrayLike<number>, bounds: readonly [number, number]): number {
  const sorted = Float64Array.from(values as ArrayLike<number>).sort();
  const n = sorted.length;
  if (n === 0) return 0;
  const q1 = sorted[Math.floor((n - 1) * 0.25)] as number;
  const q3 = sorted[Math.ceil((n - 1) * 0.75)] as number;
  let best = 0;
  for (const b of bounds) {
    if (!Number.isFinite(b) || b < q1 || b > q3) continue;
    let count = 0;
    for (let i = 0; i < n; i += 1) if (sorted[i] === b) count += 1;
    best = Math.max(best, count / n);
  }
  return best;
}

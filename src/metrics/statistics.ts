/**
 * Order statistics used by every summary. Quantiles use linear interpolation between order
 * statistics (Hyndman–Fan type 7, the default of R and NumPy), so a reader can reproduce them.
 */

/** Quantile q ∈ [0, 1] of an ascending-sorted, non-empty array. */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) throw new RangeError('quantile of an empty sample');
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile level must be in [0, 1], got ${q}`);
  const h = (n - 1) * q;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, n - 1);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (h - lo) * (b - a);
}

/** Median of a non-empty sample (mean of the two middle values when n is even). */
export function median(values: ArrayLike<number>): number {
  if (values.length === 0) throw new RangeError('median of an empty sample');
  const sorted = Float64Array.from(values as ArrayLike<number>).sort();
  return quantileSorted(sorted, 0.5);
}

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

/**
 * Rearrange `a[0..n)` so that `a[k]` holds the k-th smallest value, everything before it ≤ and
 * everything after it ≥ (Hoare's selection with a median-of-three pivot; expected O(n)).
 */
export function selectKth(a: Float64Array, n: number, k: number): number {
  let lo = 0;
  let hi = n - 1;
  while (hi > lo) {
    const mid = (lo + hi) >>> 1;
    // Median of three to a[mid], then use it as the pivot value.
    if ((a[mid] as number) < (a[lo] as number)) swap(a, mid, lo);
    if ((a[hi] as number) < (a[lo] as number)) swap(a, hi, lo);
    if ((a[hi] as number) < (a[mid] as number)) swap(a, hi, mid);
    const pivot = a[mid] as number;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while ((a[i] as number) < pivot) i += 1;
      while ((a[j] as number) > pivot) j -= 1;
      if (i <= j) {
        swap(a, i, j);
        i += 1;
        j -= 1;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else break;
  }
  return a[k] as number;
}

function swap(a: Float64Array, i: number, j: number): void {
  const t = a[i] as number;
  a[i] = a[j] as number;
  a[j] = t;
}

/**
 * Median of `a[0..n)` by selection instead of sorting, equal to `quantileSorted` of the sorted
 * values at 0.5 (type 7). Reorders `a`.
 */
export function selectMedian(a: Float64Array, n: number): number {
  if (n === 0) throw new RangeError('median of an empty sample');
  const h = (n - 1) * 0.5;
  const k = Math.floor(h);
  const lower = selectKth(a, n, k);
  if (k + 1 >= n) return lower;
  // After selection every value right of k is ≥ a[k]: the next order statistic is their minimum.
  let upper = a[k + 1] as number;
  for (let i = k + 2; i < n; i += 1) if ((a[i] as number) < upper) upper = a[i] as number;
  return lower + (h - k) * (upper - lower);
}

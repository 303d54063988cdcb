/**
 * Wilson score interval for a binomial proportion (Wilson 1927; method 3 of Newcombe 1998). Unlike
 * the Wald interval it stays inside [0, 1] and does not collapse to a point at 0/n or n/n, which
 * is exactly where recovery rates live (0 of 64 recovered, 64 of 64 recovered).
 */
export interface Proportion {
  k: number;
  n: number;
  /** k / n */
  rate: number;
  lo: number;
  hi: number;
}

/** Two-sided Wilson interval; null when n = 0 (nothing was measured). */
export function wilsonInterval(k: number, n: number, confidence = 0.95): Proportion | null {
  if (!Number.isInteger(k) || !Number.isInteger(n) || k < 0 || n < 0 || k > n) {
    throw new RangeError(`need integers 0 <= k <= n, got k=${k}, n=${n}`);
  }
  if (n === 0) return null;
  const p = k / n;
  const [lo, hi] = wilsonBounds(p, n, normalQuantile(1 - (1 - confidence) / 2));
  return { k, n, rate: p, lo, hi };
}

/**
 * Wilson's bounds for a rate p over n trials at quantile z, n not necessarily an integer (an
 * effective number of trials; `designProportion` passes a t quantile as z). The same formula as
 * `wilsonInterval`, exact 0 and 1 at p = 0 and p = 1.
 */
export function wilsonBounds(p: number, n: number, z: number): [number, number] {
  if (!(n > 0) || !(p >= 0 && p <= 1)) throw new RangeError(`need 0 <= p <= 1 and n > 0, got p=${p}, n=${n}`);
  const z2 = z * z;
  const denom = 1 + z2 / n;
  const centre = (p + z2 / (2 * n)) / denom;
  const half = (z / denom) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  // Clamp the rounding dust at the ends: 0/n must give exactly 0, n/n exactly 1.
  return [p === 0 ? 0 : Math.max(0, centre - half), p === 1 ? 1 : Math.min(1, centre + half)];
}

/**
 * Inverse of the standard normal CDF (Acklam's rational approximation, relative error < 1.2e-9),
 * so any confidence level works, not only a hard-coded 1.96.
 */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`probability must be in (0, 1), got ${p}`);
  const a = [
    -3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1,
    2.506628277459239,
  ];
  const b = [
    -5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1,
  ];
  const c = [
    -7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
  const [a0, a1, a2, a3, a4, a5] = a as [number, number, number, number, number, number];
  const [b0, b1, b2, b3, b4] = b as [number, number, number, number, number];
  const [c0, c1, c2, c3, c4, c5] = c as [number, number, number, number, number, number];
  const [d0, d1, d2, d3] = d as [number, number, number, number];
  const low = 0.02425;
  let x: number;
  if (p < low) {
    const q = Math.sqrt(-2 * Math.log(p));
    x = (((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
  } else if (p <= 1 - low) {
    const q = p - 0.5;
    const r = q * q;
    x =
      ((((((a0 * r + a1) * r + a2) * r + a3) * r + a4) * r + a5) * q) /
      (((((b0 * r + b1) * r + b2) * r + b3) * r + b4) * r + 1);
  } else {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    x = -(((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
  }
  return x;
}

/**
 * The few distribution functions the intervals need: Student's t quantile (studentised bootstrap
 * intervals with Satterthwaite degrees of freedom) and the beta quantile (Clopper–Pearson bounds).
 * Written here rather than taken from a library: no kept dependency has them, and the pieces are
 * short and checked against published tables (`test/metrics/distributions.test.ts`).
 */

const LANCZOS = [
  676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
  -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
];

/** ln Γ(x) for x > 0 (Lanczos, g = 7; relative error ~1e-15). */
export function logGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = 0.99999999999980993;
  const t = z + 7.5;
  for (let i = 0; i < LANCZOS.length; i += 1) a += (LANCZOS[i] as number) / (z + i + 1);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Continued fraction of the incomplete beta function (modified Lentz). */
function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 10_000; m += 1) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-15) break;
  }
  return h;
}

/** Regularised incomplete beta I_x(a, b), a, b > 0, x ∈ [0, 1]. */
export function betaIncomplete(x: number, a: number, b: number): number {
  if (!(a > 0 && b > 0)) throw new RangeError(`betaIncomplete: a and b must be > 0, got ${a}, ${b}`);
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log1p(-x));
  return x < (a + 1) / (a + b + 2) ? (front * betaFraction(x, a, b)) / a : 1 - (front * betaFraction(1 - x, b, a)) / b;
}

/** Inverse of a non-decreasing function on [lo, hi] by bisection (to double precision). */
function invert(f: (x: number) => number, p: number, lo: number, hi: number): number {
  for (let i = 0; i < 200; i += 1) {
    const mid = 0.5 * (lo + hi);
    if (mid === lo || mid === hi) break;
    if (f(mid) < p) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

/** The p-quantile of Beta(a, b). */
export function betaQuantile(p: number, a: number, b: number): number {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`betaQuantile: p must be in [0, 1], got ${p}`);
  if (p === 0) return 0;
  if (p === 1) return 1;
  return invert((x) => betaIncomplete(x, a, b), p, 0, 1);
}

/** P(T ≤ t) for Student's t with ν > 0 degrees of freedom (ν need not be an integer). */
export function studentTCdf(t: number, df: number): number {
  if (!(df > 0)) throw new RangeError(`studentTCdf: df must be > 0, got ${df}`);
  const tail = 0.5 * betaIncomplete(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** The p-quantile of Student's t with ν > 0 degrees of freedom (ν = Infinity: the normal). */
export function studentTQuantile(p: number, df: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`studentTQuantile: p must be in (0, 1), got ${p}`);
  if (p === 0.5) return 0;
  if (p < 0.5) return -studentTQuantile(1 - p, df);
  if (!Number.isFinite(df) || df > 1e7) df = 1e7;
  let hi = 1;
  while (studentTCdf(hi, df) < p) hi *= 2;
  return invert((t) => studentTCdf(t, df), p, 0, hi);
}

/**
 * Two-sided Clopper–Pearson interval for k successes in n trials at the given confidence
 * (exact: each side holds at most (1 − confidence)/2).
 */
export function clopperPearson(k: number, n: number, confidence = 0.95): { lo: number; hi: number } {
  if (!(Number.isInteger(k) && Number.isInteger(n) && k >= 0 && k <= n && n > 0))
    throw new RangeError(`clopperPearson: need 0 <= k <= n, n > 0, got ${k}/${n}`);
  const a = (1 - confidence) / 2;
  return { lo: k === 0 ? 0 : betaQuantile(a, k, n - k + 1), hi: k === n ? 1 : betaQuantile(1 - a, k + 1, n - k) };
}

import { normalLogCdf, normalLogCdfFast } from './gaussian.js';

/**
 * Extrapolated exposure for a sampled candidate space, after TensorFlow Privacy's secret_sharer
 * `compute_exposure_extrapolation` (tensorflow/privacy,
 * `tensorflow_privacy/privacy/privacy_tests/secret_sharer/exposures.py`): fit a skew-normal to the
 * decoys' scores and read the true code's exposure from the fitted tail, −log2 P(decoy ≥ true), so
 * it can go beyond the rank ceiling log2(decoys + 1) of the sampled space.
 *
 * Orientation: scores here are log-probabilities (higher = more likely), TF Privacy's are
 * perplexities (lower = more likely) read with the CDF. The skew-normal family is closed under
 * negation (shape α ↦ −α), so fitting the scores and reading the survival function is the same
 * model as TF Privacy's on negated scores.
 *
 * Fit: maximum likelihood (as scipy's `skewnorm.fit`, which TF Privacy calls), by Nelder–Mead on
 * (location, log scale, shape) of the standardized scores, started from the method-of-moments
 * estimate and from shape 0; |shape| is bounded at 50 (the likelihood can drift to an infinite
 * shape on half-normal-like data, where the fit is read as a half-normal anyway). The search reads
 * log Φ from a table (`normalLogCdfFast`, error < 1e-9), and the KS distance integrates the density
 * between sorted decoys instead of one tail integral per decoy: about 35 ms per probe at 1,000
 * decoys instead of 300–600 (`bench/extrapolation.ts --timing`, docs/metrics.md).
 *
 * Diagnostics, because a tail model is read far beyond the data that fitted it:
 * - `ks`: the Kolmogorov–Smirnov distance between the decoys' empirical CDF and the fitted one;
 *   flagged above 1.36/√n (the 5% critical value for a fully specified distribution; with fitted
 *   parameters the true null distance is smaller, so this flags less often than a 5% test would).
 * - `tail_error_bits`: log2(fitted P(decoy ≥ s_k) / (k/n)) at the k-th highest decoy score,
 *   k = max(5, ⌈n/100⌉): the fitted upper tail against the empirical one where data still exist;
 *   flagged beyond ±1 bit.
 * A flagged fit whose extrapolated exposure lies above the rank ceiling is withheld (`exposure`
 * null, `status` 'withheld'); a flagged fit at or below the ceiling is reported with status
 * 'flagged'. Only a fit that passes both checks reports a value above the ceiling ('ok').
 */

/** A skew-normal distribution: density 2/ω · φ(z) · Φ(αz), z = (x − ξ)/ω. */
export interface SkewNormal {
  /** ξ, in score units. */
  location: number;
  /** ω > 0, in score units. */
  scale: number;
  /** α (0: the normal distribution). */
  shape: number;
}

const LOG2 = Math.log(2);
const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);
const MAX_SHAPE = 50;

export function skewNormalLogPdf(x: number, d: SkewNormal): number {
  const z = (x - d.location) / d.scale;
  return LOG2 - Math.log(d.scale) - LOG_SQRT_2PI - 0.5 * z * z + normalLogCdf(d.shape * z);
}

/**
 * log P(X ≥ x) of a skew-normal, accurate far into the upper tail (no 1 − F cancellation): the
 * integral of the density from z upward, in log space, on segments of doubling width starting at
 * z (where a steep tail puts all its mass). Below the bulk it is log1p(−F), F read the same way
 * from the mirrored distribution (X ↦ −X, α ↦ −α).
 */
export function skewNormalLogSf(x: number, d: SkewNormal): number {
  const z = (x - d.location) / d.scale;
  if (z === Infinity) return -Infinity;
  if (z === -Infinity) return 0;
  if (z < 0) {
    const lower = Math.exp(upperTailLog(-z, -d.shape));
    return Math.log1p(-Math.min(lower, 1));
  }
  return Math.min(0, upperTailLog(z, d.shape));
}

/** P(X ≤ x). */
export function skewNormalCdf(x: number, d: SkewNormal): number {
  return -Math.expm1(skewNormalLogSf(x, d));
}

/** log ∫_z^∞ 2 φ(t) Φ(αt) dt for the standard skew-normal. */
function upperTailLog(z: number, alpha: number): number {
  const g = (t: number): number => LOG2 - LOG_SQRT_2PI - 0.5 * t * t + normalLogCdf(alpha * t);
  // Simpson's rule on segments [a, a + w], w doubling from a width the tail's decay rate sets.
  const rate = Math.abs(z) + (alpha < 0 ? alpha * alpha * Math.max(z, 0) + Math.abs(alpha) : Math.abs(alpha)) + 1;
  let width = 0.02 / rate;
  let a = z;
  const per = 32;
  const logs: number[] = [];
  const weights: number[] = [];
  let peak = -Infinity;
  for (let segment = 0; segment < 80; segment += 1) {
    const h = width / per;
    let last = -Infinity;
    for (let i = 0; i <= per; i += 1) {
      const v = g(a + i * h);
      const w = (i === 0 || i === per ? 1 : i % 2 === 1 ? 4 : 2) * (h / 3);
      logs.push(v);
      weights.push(w);
      if (v > peak) peak = v;
      last = v;
    }
    a += width;
    width *= 2;
    // Past the density's bulk (t ≥ 0 ≥ the mode's lower side) and 60 nats below the peak: done.
    if (a > 0 && last < peak - 60) break;
  }
  let sum = 0;
  for (let i = 0; i < logs.length; i += 1) sum += (weights[i] as number) * Math.exp((logs[i] as number) - peak);
  return peak + Math.log(sum);
}

export interface SkewNormalFit {
  distribution: SkewNormal;
  /** 'mle': maximum likelihood (Nelder–Mead); 'moments' when the likelihood search could not improve it. */
  method: 'mle' | 'moments';
  logLikelihood: number;
}

function mean(xs: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i += 1) s += xs[i] as number;
  return s / xs.length;
}

/** Method-of-moments skew-normal (sample skewness clipped to the family's ±0.995). */
export function skewNormalMoments(xs: ArrayLike<number>): SkewNormal {
  const n = xs.length;
  const m = mean(xs);
  let m2 = 0;
  let m3 = 0;
  for (let i = 0; i < n; i += 1) {
    const d = (xs[i] as number) - m;
    m2 += d * d;
    m3 += d * d * d;
  }
  m2 /= n;
  m3 /= n;
  const sd = Math.sqrt(m2);
  const skew = Math.max(-0.99, Math.min(0.99, m2 > 0 ? m3 / m2 ** 1.5 : 0));
  const g = Math.abs(skew) ** (2 / 3);
  const delta = Math.sign(skew) * Math.sqrt((Math.PI / 2) * (g / (g + ((4 - Math.PI) / 2) ** (2 / 3))));
  const scale = sd / Math.sqrt(1 - (2 * delta * delta) / Math.PI);
  return { location: m - scale * delta * Math.sqrt(2 / Math.PI), scale, shape: delta / Math.sqrt(1 - delta * delta) };
}

export function skewNormalLogLikelihood(xs: ArrayLike<number>, d: SkewNormal): number {
  let ll = 0;
  for (let i = 0; i < xs.length; i += 1) ll += skewNormalLogPdf(xs[i] as number, d);
  return ll;
}

/** The log-likelihood with the tabulated log Φ (`normalLogCdfFast`, error < 1e-9 per point): what the search evaluates. */
function fastLogLikelihood(xs: ArrayLike<number>, d: SkewNormal): number {
  const { location, scale, shape } = d;
  let ll = 0;
  for (let i = 0; i < xs.length; i += 1) {
    const z = ((xs[i] as number) - location) / scale;
    ll += -0.5 * z * z + normalLogCdfFast(shape * z);
  }
  return ll + xs.length * (LOG2 - Math.log(scale) - LOG_SQRT_2PI);
}

/** Nelder–Mead minimization (standard coefficients), for the three-parameter likelihood. */
function nelderMead(
  f: (p: number[]) => number,
  start: number[],
  steps: number[],
  maxEvaluations = 2000,
): { point: number[]; value: number } {
  const dim = start.length;
  let simplex = [start, ...steps.map((s, i) => start.map((v, j) => (j === i ? v + s : v)))].map((p) => ({
    point: p,
    value: f(p),
  }));
  let evaluations = dim + 1;
  const combine = (a: number[], b: number[], t: number): number[] => a.map((v, i) => v + t * ((b[i] as number) - v));
  while (evaluations < maxEvaluations) {
    simplex.sort((x, y) => x.value - y.value);
    const best = simplex[0] as { point: number[]; value: number };
    const worst = simplex[dim] as { point: number[]; value: number };
    if (Math.abs(worst.value - best.value) < 1e-10 * (1 + Math.abs(best.value))) break;
    const centroid = new Array<number>(dim).fill(0);
    for (let k = 0; k < dim; k += 1)
      for (let i = 0; i < dim; i += 1)
        centroid[i] = (centroid[i] as number) + ((simplex[k] as { point: number[] }).point[i] as number) / dim;
    const reflected = combine(centroid, worst.point, -1);
    const fr = f(reflected);
    evaluations += 1;
    const second = simplex[dim - 1] as { value: number };
    if (fr < best.value) {
      const expanded = combine(centroid, worst.point, -2);
      const fe = f(expanded);
      evaluations += 1;
      simplex[dim] = fe < fr ? { point: expanded, value: fe } : { point: reflected, value: fr };
    } else if (fr < second.value) {
      simplex[dim] = { point: reflected, value: fr };
    } else {
      const contracted = fr < worst.value ? combine(centroid, reflected, 0.5) : combine(centroid, worst.point, 0.5);
      const fc = f(contracted);
      evaluations += 1;
      if (fc < Math.min(fr, worst.value)) {
        simplex[dim] = { point: contracted, value: fc };
      } else {
        simplex = simplex.map((v, k) => (k === 0 ? v : { point: combine(best.point, v.point, 0.5), value: NaN }));
        for (const v of simplex) if (Number.isNaN(v.value)) v.value = f(v.point);
        evaluations += dim;
      }
    }
  }
  simplex.sort((x, y) => x.value - y.value);
  return simplex[0] as { point: number[]; value: number };
}

export interface FitOptions {
  /**
   * The log Φ the likelihood search uses: `tabulated` (default; `normalLogCdfFast`, error < 1e-9
   * per point) or `exact` (`normalLogCdf`, the reference that `bench/extrapolation.ts --timing`
   * runs side by side).
   */
  likelihood?: 'tabulated' | 'exact';
}

/** Maximum-likelihood skew-normal fit. Needs ≥ 3 finite scores that are not all equal. */
export function fitSkewNormal(scores: ArrayLike<number>, options: FitOptions = {}): SkewNormalFit {
  const n = scores.length;
  if (n < 3) throw new RangeError(`a skew-normal fit needs at least 3 scores, got ${n}`);
  for (let i = 0; i < n; i += 1)
    if (!Number.isFinite(scores[i] as number)) throw new RangeError(`score ${i} is not finite (${scores[i]})`);
  const m = mean(scores);
  let v = 0;
  for (let i = 0; i < n; i += 1) v += ((scores[i] as number) - m) ** 2;
  const sd = Math.sqrt(v / n);
  if (!(sd > 0)) throw new RangeError('all scores are equal: no distribution can be fitted');
  // Standardized data keep the simplex well scaled whatever the scores' units.
  const ys = Float64Array.from({ length: n }, (_, i) => ((scores[i] as number) - m) / sd);
  const exact = options.likelihood === 'exact';
  const negLl = (p: number[]): number => {
    const [loc, logScale, shape] = p as [number, number, number];
    if (Math.abs(shape) > MAX_SHAPE || Math.abs(logScale) > 10) return Infinity;
    const d = { location: loc, scale: Math.exp(logScale), shape };
    const ll = exact ? skewNormalLogLikelihood(ys, d) : fastLogLikelihood(ys, d);
    return Number.isFinite(ll) ? -ll : Infinity;
  };
  const mom = skewNormalMoments(ys);
  const starts = [
    [mom.location, Math.log(mom.scale), mom.shape],
    [0, 0, 0],
  ];
  let best = { point: starts[0] as number[], value: negLl(starts[0] as number[]) };
  const momValue = best.value;
  for (const s of starts) {
    const r = nelderMead(negLl, s, [0.3, 0.2, 1]);
    // A restart from the best point settles a simplex that collapsed early.
    const again = nelderMead(negLl, r.point, [0.1, 0.1, 0.5]);
    if (again.value < best.value) best = again;
  }
  const [loc, logScale, shape] = best.point as [number, number, number];
  const distribution = { location: m + sd * loc, scale: sd * Math.exp(logScale), shape };
  return {
    distribution,
    method: best.value < momValue ? 'mle' : 'moments',
    logLikelihood: skewNormalLogLikelihood(scores, distribution),
  };
}

/**
 * Kolmogorov–Smirnov distance between the sample's empirical CDF and `d`'s. The fitted CDF is read
 * exactly at the lowest score, then carried upward by integrating the density between consecutive
 * sorted scores (Simpson, steps of at most scale/(20·max(1, |shape|)), which resolves the steep
 * side of a strongly skewed density): one tail integral instead of one per score.
 */
export function ksDistance(scores: ArrayLike<number>, d: SkewNormal): number {
  const sorted = Float64Array.from(scores).sort();
  const n = sorted.length;
  if (n === 0) return 0;
  const maxStep = d.scale / (20 * Math.max(1, Math.abs(d.shape)));
  const pdf = (x: number): number => Math.exp(skewNormalLogPdf(x, d));
  let f = skewNormalCdf(sorted[0] as number, d);
  let worst = Math.max(f, Math.abs(1 / n - f));
  for (let i = 1; i < n; i += 1) {
    const a = sorted[i - 1] as number;
    const b = sorted[i] as number;
    if (b > a) {
      const m = 2 * Math.ceil((b - a) / (2 * maxStep));
      const h = (b - a) / m;
      let sum = pdf(a) + pdf(b);
      for (let j = 1; j < m; j += 1) sum += (j % 2 === 1 ? 4 : 2) * pdf(a + j * h);
      f = Math.min(1, f + (sum * h) / 3);
    }
    worst = Math.max(worst, Math.abs(f - i / n), Math.abs((i + 1) / n - f));
  }
  return worst;
}

export type ExtrapolationStatus = 'ok' | 'flagged' | 'withheld' | 'unfit';

export interface ExtrapolatedExposure {
  /** The exposure to report: the fitted tail's, or null when withheld or unfit. */
  exposure: number | null;
  /** −log2 of the fitted P(decoy ≥ true score), whatever the diagnostics (null: no fit). */
  fitted_exposure: number | null;
  /** log2(decoys + 1): what a rank among the sampled decoys can reach. */
  rank_ceiling: number;
  status: ExtrapolationStatus;
  /** Why the fit is flagged, withheld or unfit (empty when 'ok'). */
  reasons: string[];
  fit: SkewNormalFit | null;
  ks: number | null;
  ks_threshold: number;
  tail_error_bits: number | null;
  tail_threshold_bits: number;
  decoys: number;
}

export interface ExtrapolationOptions {
  /** KS threshold as c/√n; default c = 1.36. */
  ksCoefficient?: number;
  /** Largest |tail error| in bits that passes; default 1. */
  tailThresholdBits?: number;
  /** Passed to `fitSkewNormal` (default `tabulated`). */
  likelihood?: FitOptions['likelihood'];
}

/**
 * The true code's extrapolated exposure from its score and the sampled decoys' scores (natural-log
 * probabilities, higher = more likely; the true code is not among the decoys).
 */
export function extrapolatedExposure(
  trueScore: number,
  decoys: ArrayLike<number>,
  options: ExtrapolationOptions = {},
): ExtrapolatedExposure {
  const n = decoys.length;
  const rankCeiling = Math.log2(n + 1);
  const ksThreshold = (options.ksCoefficient ?? 1.36) / Math.sqrt(Math.max(n, 1));
  const tailThreshold = options.tailThresholdBits ?? 1;
  const base = { rank_ceiling: rankCeiling, ks_threshold: ksThreshold, tail_threshold_bits: tailThreshold, decoys: n };
  if (!Number.isFinite(trueScore)) throw new RangeError(`the true code's score is not finite (${trueScore})`);
  let fit: SkewNormalFit;
  try {
    fit = fitSkewNormal(decoys, options.likelihood ? { likelihood: options.likelihood } : {});
  } catch (error) {
    return {
      ...base,
      exposure: null,
      fitted_exposure: null,
      status: 'unfit',
      reasons: [(error as Error).message],
      fit: null,
      ks: null,
      tail_error_bits: null,
    };
  }
  const d = fit.distribution;
  const fitted = -skewNormalLogSf(trueScore, d) / LOG2;
  const ks = ksDistance(decoys, d);
  const sorted = Float64Array.from(decoys).sort();
  const k = Math.min(n, Math.max(5, Math.ceil(n / 100)));
  const sk = sorted[n - k] as number;
  const tailError = skewNormalLogSf(sk, d) / LOG2 - Math.log2(k / n);
  const reasons: string[] = [];
  if (ks > ksThreshold) reasons.push(`KS distance ${ks.toFixed(4)} > ${ksThreshold.toFixed(4)}`);
  if (Math.abs(tailError) > tailThreshold)
    reasons.push(
      `fitted tail off by ${tailError.toFixed(2)} bits at the top ${k} of ${n} decoys (limit ±${tailThreshold})`,
    );
  let status: ExtrapolationStatus = 'ok';
  let reported: number | null = fitted;
  if (reasons.length > 0) {
    if (fitted > rankCeiling) {
      status = 'withheld';
      reported = null;
      reasons.push(
        `extrapolated ${fitted.toFixed(2)} bits lies above the rank ceiling ${rankCeiling.toFixed(2)} on a poor fit`,
      );
    } else {
      status = 'flagged';
    }
  }
  return { ...base, exposure: reported, fitted_exposure: fitted, status, reasons, fit, ks, tail_error_bits: tailError };
}

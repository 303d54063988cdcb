import { normalQuantile } from './wilson.js';

/**
 * The standard normal to double precision, and the Gaussian-DP conversions the GDP and f-DP ε
 * bounds need (`privacy-gdp.ts`, `privacy-fdp.ts`). Written here: no kept dependency has them.
 *
 * - Φ through erfc: the series erf(z) = 2/√π e^{−z²} Σ 2ⁿ z^{2n+1}/(1·3·…·(2n+1)) below z = 2.5
 *   (all terms positive: no cancellation), Laplace's continued fraction above (relative error
 *   near 1e-15 in the far tail, where 1 − erf would lose every digit);
 * - log Φ from the continued fraction in the lower tail, so Φ(−40) ≈ 1e-350 is still a number;
 * - Φ⁻¹: Acklam's approximation (`wilson.ts`) polished by two Halley steps on the exact Φ.
 */

const SQRT_PI = Math.sqrt(Math.PI);
const SQRT1_2 = Math.SQRT1_2;

/** erfc(z) · e^{z²} · √π for z ≥ 2.5 (Laplace's continued fraction, evaluated backwards). */
function erfcScaledFraction(z: number): number {
  let t = z;
  for (let k = 200; k >= 1; k -= 1) t = z + k / 2 / t;
  return 1 / t;
}

/** erf(z) for 0 ≤ z < 2.5 (the positive series). */
function erfSeries(z: number): number {
  let term = z;
  let sum = z;
  const z2 = z * z;
  for (let n = 1; n < 500; n += 1) {
    term *= (2 * z2) / (2 * n + 1);
    sum += term;
    if (term < 1e-17 * sum) break;
  }
  return (2 / SQRT_PI) * Math.exp(-z2) * sum;
}

/** The complementary error function. */
export function erfc(z: number): number {
  if (Number.isNaN(z)) return NaN;
  if (z < 0) return 2 - erfc(-z);
  if (z < 2.5) return 1 - erfSeries(z);
  if (z > 27.3) return 0;
  return (Math.exp(-z * z) * erfcScaledFraction(z)) / SQRT_PI;
}

/** Φ(x), the standard normal CDF. */
export function normalCdf(x: number): number {
  if (x === Infinity) return 1;
  if (x === -Infinity) return 0;
  return 0.5 * erfc(-x * SQRT1_2);
}

/** log Φ(x), finite far into the lower tail. */
export function normalLogCdf(x: number): number {
  if (x === -Infinity) return -Infinity;
  if (x === Infinity) return 0;
  const z = -x * SQRT1_2;
  if (z >= 2.5) return Math.log(0.5) - z * z + Math.log(erfcScaledFraction(z) / SQRT_PI);
  return Math.log(normalCdf(x));
}

/** Φ⁻¹(p), the standard normal quantile (−∞ at 0, +∞ at 1). */
export function normalPpf(p: number): number {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`normalPpf: p must be in [0, 1], got ${p}`);
  if (p === 0) return -Infinity;
  if (p === 1) return Infinity;
  let x = normalQuantile(p);
  for (let i = 0; i < 2; i += 1) {
    // Halley's step on Φ(x) − p; the density in the log domain keeps the far tail finite.
    const e = normalCdf(x) - p;
    const u = e * Math.sqrt(2 * Math.PI) * Math.exp((x * x) / 2);
    if (!Number.isFinite(u)) break;
    x -= u / (1 + (x * u) / 2);
  }
  return x;
}

/** Φ⁻¹(1 − q) without forming 1 − q (the inverse survival function). */
export function normalIsf(q: number): number {
  return -normalPpf(q);
}

/** ln(e^a − e^b) for a ≥ b; −∞ when rounding leaves b ≥ a (a difference below double precision). */
function logSub(a: number, b: number): number {
  return b >= a ? -Infinity : a + Math.log1p(-Math.exp(b - a));
}

/**
 * ln δ(ε) of μ-GDP (equivalently the Gaussian mechanism with σ = 1/μ at sensitivity 1):
 * δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2019, Corollary 2.13; Balle &
 * Wang 2018, Eq. 6), in the log domain.
 */
export function gdpLogDelta(mu: number, eps: number): number {
  if (!(mu > 0)) throw new RangeError(`gdpLogDelta: mu must be > 0, got ${mu}`);
  return logSub(normalLogCdf(-eps / mu + mu / 2), eps + normalLogCdf(-eps / mu - mu / 2));
}

/** The ε of μ-GDP at δ (0 when δ(0) ≤ δ; bisection on [0, 100] as jax_privacy's `epsilon_from_gdp`). */
export function gdpEpsilonAt(mu: number, delta: number): number {
  if (!(delta > 0 && delta <= 1)) throw new RangeError(`gdpEpsilonAt: delta must be in (0, 1], got ${delta}`);
  if (!(mu > 0)) return 0;
  const logDelta = Math.log(delta);
  const gap = (eps: number): number => gdpLogDelta(mu, eps) - logDelta;
  if (gap(0) <= 0) return 0;
  let lo = 0;
  let hi = 100;
  if (gap(hi) >= 0) return hi;
  for (let i = 0; i < 100 && hi - lo > 1e-12; i += 1) {
    const mid = 0.5 * (lo + hi);
    if (gap(mid) > 0) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

/**
 * The μ (= 1/σ of the Gaussian mechanism) whose δ(ε) equals δ: `dp_accounting.get_sigma_gaussian`
 * inverted. Infinity when δ ≥ 1 (no Gaussian mechanism is needed); bisection on ln μ.
 */
export function gdpMuFor(eps: number, delta: number): number {
  if (!(eps >= 0)) throw new RangeError(`gdpMuFor: eps must be >= 0, got ${eps}`);
  if (!(delta > 0)) throw new RangeError(`gdpMuFor: delta must be > 0, got ${delta}`);
  if (delta >= 1) return Infinity;
  const logDelta = Math.log(delta);
  // δ(ε) grows with μ: bracket, then bisect on ln μ.
  let lo = Math.log(1e-6);
  let hi = 0;
  while (gdpLogDelta(Math.exp(hi), eps) < logDelta) {
    lo = hi;
    hi += 1;
    if (hi > 30) return Infinity;
  }
  while (gdpLogDelta(Math.exp(lo), eps) > logDelta) {
    hi = lo;
    lo -= 5;
  }
  for (let i = 0; i < 200 && hi - lo > 1e-14; i += 1) {
    const mid = 0.5 * (lo + hi);
    if (gdpLogDelta(Math.exp(mid), eps) < logDelta) lo = mid;
    else hi = mid;
  }
  return Math.exp(0.5 * (lo + hi));
}

/**
 * log Φ(x) by cubic Hermite interpolation on a table of the exact value and its slope φ/Φ at
 * steps of 1/64 over [−38, 8.5], 0 above it (Φ(−x) < 1e-17) and the asymptotic series of Mills'
 * ratio below: many times faster than `normalLogCdf`, absolute error below 1e-9 (tested against
 * it from −60 to 60), for the skew-normal likelihood
 * that a fit evaluates at every decoy hundreds of times. The table (3,000 points) is built on
 * first use.
 */
export function normalLogCdfFast(x: number): number {
  const t = (x - FAST_LO) * FAST_STEPS;
  if (!(t >= 0 && t < FAST_N - 1)) {
    if (Number.isNaN(x)) return NaN;
    // Above 8.5: log Φ(x) = log1p(−Φ(−x)) and Φ(−x) < 1e-17.
    if (x > 0) return 0;
    if (x === -Infinity) return -Infinity;
    // Below −38: the asymptotic series of Mills' ratio; its first omitted term, 945/x¹⁰, is < 1e-12.
    const r = 1 / (x * x);
    return -0.5 * x * x - Math.log(-x) - LOG_SQRT_2PI + Math.log1p(r * (-1 + r * (3 + r * (-15 + r * 105))));
  }
  const table = fastTable ?? buildFastTable();
  const i = Math.floor(t);
  const u = t - i;
  const f0 = table[2 * i] as number;
  const d0 = table[2 * i + 1] as number;
  const f1 = table[2 * i + 2] as number;
  const d1 = table[2 * i + 3] as number;
  const u2 = u * u;
  const u3 = u2 * u;
  const h = 1 / FAST_STEPS;
  return (2 * u3 - 3 * u2 + 1) * f0 + (u3 - 2 * u2 + u) * h * d0 + (-2 * u3 + 3 * u2) * f1 + (u3 - u2) * h * d1;
}

const FAST_LO = -38;
const FAST_STEPS = 64;
const FAST_N = Math.round((8.5 - FAST_LO) * FAST_STEPS) + 1;
let fastTable: Float64Array | null = null;
const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

function buildFastTable(): Float64Array {
  const table = new Float64Array(2 * FAST_N);
  for (let i = 0; i < FAST_N; i += 1) {
    const x = FAST_LO + i / FAST_STEPS;
    const f = normalLogCdf(x);
    table[2 * i] = f;
    // d/dx log Φ(x) = φ(x)/Φ(x), in logs so the lower tail stays finite.
    table[2 * i + 1] = Math.exp(-0.5 * x * x - LOG_SQRT_2PI - f);
  }
  fastTable = table;
  return table;
}

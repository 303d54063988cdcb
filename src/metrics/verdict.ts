import type { VarianceComponents } from './bootstrap.js';
import { medianDf } from './clustered-sample.js';
import { studentTCdf, studentTQuantile } from './distributions.js';
import { normalQuantile } from './wilson.js';

/**
 * Verdicts for a family of declared comparisons, each an estimate (a median or a difference of
 * medians, in bits) with its standard error and degrees of freedom from the report's bootstrap
 * machinery (`bootstrap.ts`: studentised intervals are estimate ± t(df) · se, so the same t gives
 * the p-values here, and a verdict agrees with the printed interval):
 * - `higher` / `lower`: the two-sided test of "no difference" rejects (the 1 − α interval
 *   excludes 0), in the direction of the estimate;
 * - `equivalent`: both one-sided tests of "the difference is at least the margin" reject (TOST:
 *   the 1 − 2α interval lies inside (−margin, +margin));
 * - `undecided`: neither.
 * A comparison can be both higher and inside the margin (a small, sure effect); it reads `higher`
 * and carries `within_margin: true`.
 *
 * Multiplicity: the family's tests are adjusted together by Holm's step-down. Each comparison
 * holds two tests (difference, equivalence) whose null hypotheses cannot both be true (Δ = 0 and
 * |Δ| ≥ margin exclude each other), so the number of true nulls is at most the number of
 * comparisons with a test still open: the step-down over the 2m sorted p-values divides α by that
 * count (closed testing with Bonferroni local tests under Shaffer's 1986 logical restriction). A
 * comparison leaves the count once both its tests reject (rejecting "no difference" says nothing
 * about the margin); with one test per comparison this is Holm's m − j + 1. FWER ≤ α over the
 * family under any dependence among the comparisons.
 */
export type VerdictKind = 'higher' | 'lower' | 'equivalent' | 'undecided';

/** An estimate with its sampling spread: se and df of a studentised interval (df Infinity: normal). */
export interface Spread {
  estimate: number;
  se: number;
  df: number;
}

export interface Tested extends Spread {
  /** Two-sided p of "no difference". */
  p_difference: number;
  /** TOST p of "|difference| ≥ margin" (the larger of the two one-sided p). */
  p_equivalence: number;
}

export interface Reading {
  verdict: VerdictKind;
  /** Decided higher or lower, with the 1 − 2α interval inside the margin too. */
  within_margin: boolean;
}

/** P(T ≤ t) for Student's t (df Infinity or huge: the normal). */
export function tCdf(t: number, df: number): number {
  if (t === Infinity) return 1;
  if (t === -Infinity) return 0;
  return studentTCdf(t, Number.isFinite(df) && df < 1e7 ? df : 1e7);
}

/**
 * The spread of an interval: a studentised one gives its se and df; any other (a percentile one
 * for one run per arm, a rank or bounds one for a ceiling-heavy cell, often lopsided) is read as a
 * normal interval with its wider half, se = max(estimate − lo, hi − estimate) / z_{1−α/2}, so that a
 * decided difference never contradicts the printed interval (higher implies lo > 0).
 */
export function spreadOf(
  i: { estimate: number; lo: number; hi: number; se: number | null; df: number | null },
  alpha: number,
): Spread {
  if (i.se !== null && i.df !== null) return { estimate: i.estimate, se: i.se, df: i.df };
  return {
    estimate: i.estimate,
    se: Math.max(0, i.estimate - i.lo, i.hi - i.estimate) / normalQuantile(1 - alpha / 2),
    df: Infinity,
  };
}

/** The difference test and the two one-sided tests against ±margin. */
export function testSpread(s: Spread, margin: number): Tested {
  if (!(margin > 0)) throw new RangeError(`margin must be > 0 bits, got ${margin}`);
  if (!(s.se > 0)) {
    // No spread at all (every resample equal): the estimate is the answer.
    return { ...s, p_difference: s.estimate === 0 ? 1 : 0, p_equivalence: Math.abs(s.estimate) < margin ? 0 : 1 };
  }
  const t = s.estimate / s.se;
  const pDifference = Math.min(1, 2 * tCdf(-Math.abs(t), s.df));
  // H0: Δ ≤ −margin (reject when the estimate is far above it) and H0: Δ ≥ +margin.
  const pAbove = tCdf(-(s.estimate + margin) / s.se, s.df);
  const pBelow = tCdf((s.estimate - margin) / s.se, s.df);
  return { ...s, p_difference: pDifference, p_equivalence: Math.max(pAbove, pBelow) };
}

/** The verdict of a tested comparison with its tests compared against their thresholds. */
export function readVerdict(
  t: Pick<Tested, 'estimate'>,
  differenceRejected: boolean,
  equivalenceRejected: boolean,
): Reading {
  if (differenceRejected && t.estimate !== 0)
    return { verdict: t.estimate > 0 ? 'higher' : 'lower', within_margin: equivalenceRejected };
  if (equivalenceRejected) return { verdict: 'equivalent', within_margin: true };
  return { verdict: 'undecided', within_margin: false };
}

/** Holm-adjusted p-values of a family (see the module comment): one pair per comparison. */
export function holmAdjust(
  family: readonly Pick<Tested, 'p_difference' | 'p_equivalence'>[],
): { p_difference: number; p_equivalence: number }[] {
  const tests = family.flatMap((c, i) => [
    { i, which: 'p_difference' as const, p: c.p_difference },
    { i, which: 'p_equivalence' as const, p: c.p_equivalence },
  ]);
  tests.sort((a, b) => a.p - b.p || a.i - b.i);
  const open = family.map(() => 2);
  let openComparisons = family.length;
  let running = 0;
  const out = family.map(() => ({ p_difference: 1, p_equivalence: 1 }));
  for (const t of tests) {
    running = Math.max(running, Math.min(1, openComparisons * t.p));
    (out[t.i] as { p_difference: number; p_equivalence: number })[t.which] = running;
    open[t.i] = (open[t.i] as number) - 1;
    if (open[t.i] === 0) openComparisons -= 1;
  }
  return out;
}

/**
 * Variance and df of components scaled to `runFactor` × their runs and `canaryFactor` × their
 * canaries, with the df the report's interval would carry at that size: per side, the crossed
 * combination's Satterthwaite df from its mean-square terms (tR = run + residual, tC = canary +
 * residual, tE = residual), floored as `combineCrossed` floors it (runs − 1 or canaries − 1); nested,
 * runs − 1 (or the within-run df when that part dominates); each at most 2(runs − 1) (`medianDf`);
 * sides combined by Welch–Satterthwaite.
 */
export function scaledVariance(
  components: readonly VarianceComponents[],
  runFactor: number,
  canaryFactor: number,
): { variance: number; df: number } {
  let variance = 0;
  let denominator = 0;
  for (const c of components) {
    const k = c.runs * runFactor;
    const n = c.canaries * canaryFactor;
    const run = c.run / runFactor;
    const canary = c.canary / canaryFactor;
    const residual = c.residual / (runFactor * canaryFactor);
    let v: number;
    let df: number;
    if (c.design === 'crossed') {
      const tR = run + residual;
      const tC = canary + residual;
      v = run + canary + residual;
      if (v <= Math.max(tR, tC)) df = tR >= tC ? k - 1 : n - 1;
      else
        df =
          (v * v) /
          ((tR * tR) / Math.max(1, k - 1) +
            (tC * tC) / Math.max(1, n - 1) +
            (residual * residual) / Math.max(1, (k - 1) * (n - 1)));
    } else {
      v = run + residual;
      df = run > 0 ? k - 1 : Math.max(1, k * n - k);
    }
    df = medianDf(df, k);
    variance += v;
    denominator += (v * v) / Math.max(1, df);
  }
  return { variance, df: denominator > 0 ? (variance * variance) / denominator : Infinity };
}

/**
 * Probability that a comparison is decided (higher, lower or equivalent) at true effect `effect`
 * with an estimate spread as t(df) × se around it: 1 − P(|est| falls where neither test rejects),
 * i.e. between max(0, margin − t_{1−α} se) and t_{1−α/2} se.
 */
export function decisionProbability(effect: number, se: number, df: number, margin: number, alpha: number): number {
  // No spread: the estimate is the effect, decided one way or the other (margin > 0).
  if (!(se > 0)) return 1;
  const q2 = studentTQuantile(1 - alpha / 2, Number.isFinite(df) ? df : Infinity);
  const q1 = studentTQuantile(1 - alpha, Number.isFinite(df) ? df : Infinity);
  const a = Math.max(0, margin - q1 * se);
  const b = q2 * se;
  if (a >= b) return 1;
  // P(a ≤ |est| ≤ b) for est = effect + se·T.
  const within = (x: number, y: number): number =>
    Math.max(0, tCdf((y - effect) / se, df) - tCdf((x - effect) / se, df));
  return Math.max(0, Math.min(1, 1 - within(a, b) - within(-b, -a)));
}

export const TARGET_POWER = 0.8;
/** The largest design power planning searches (runs and canaries each up to this many times the audit's). */
export const MAX_FACTOR = 64;

export interface PowerAdvice {
  /** Decision probability at the audit's own size. */
  probability: number;
  /** Total runs (run pairs) that reach the target with the canaries as they are; null: none up to MAX_FACTOR ×. */
  runs: number | null;
  /** Canaries per run that reach it with the runs as they are; null: none up to MAX_FACTOR ×. */
  canaries: number | null;
  /**
   * When neither alone reaches it: the fewest runs that do with canaries up to MAX_FACTOR ×, and
   * the fewest canaries at those runs (null: not even both at MAX_FACTOR ×, or one alone suffices).
   */
  both: { runs: number; canaries: number } | null;
  /** The audit's own runs and canaries (the first component's). */
  at: { runs: number; canaries: number };
}

/**
 * From a comparison's variance components: the decision probability at the observed effect with
 * the audit as it is, and the smallest number of runs (canaries unchanged) and of canaries (runs
 * unchanged) that would decide it with probability `target` at level α.
 */
export function powerAdvice(
  effect: number,
  components: readonly VarianceComponents[],
  margin: number,
  alpha: number,
  target = TARGET_POWER,
): PowerAdvice | null {
  const first = components[0];
  if (!first) return null;
  const at = { runs: first.runs, canaries: Math.round(first.canaries) };
  const probability = (rf: number, cf: number): number => {
    const v = scaledVariance(components, rf, cf);
    return decisionProbability(effect, Math.sqrt(v.variance), v.df, margin, alpha);
  };
  // The probability grows with n: double until it reaches the target, then bisect.
  const search = (size: number, reach: (n: number) => number): number | null => {
    if (reach(size) >= target) return size;
    let lo = size;
    let hi = size * 2;
    while (reach(hi) < target) {
      if (hi >= size * MAX_FACTOR) return null;
      lo = hi;
      hi = Math.min(size * MAX_FACTOR, hi * 2);
    }
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (reach(mid) >= target) hi = mid;
      else lo = mid;
    }
    return hi;
  };
  const runs = search(at.runs, (n) => probability(n / at.runs, 1));
  const canaries = search(at.canaries, (n) => probability(1, n / at.canaries));
  let both: PowerAdvice['both'] = null;
  if (runs === null && canaries === null) {
    const r = search(at.runs, (n) => probability(n / at.runs, MAX_FACTOR));
    const c = r === null ? null : search(at.canaries, (n) => probability(r / at.runs, n / at.canaries));
    if (r !== null && c !== null) both = { runs: r, canaries: c };
  }
  return { probability: probability(1, 1), runs, canaries, both, at };
}

/** Components measured at one size, rescaled to `runs` runs and `canaries` canaries per run. */
export function rescaleComponents(
  components: readonly VarianceComponents[],
  runs: number,
  canaries: number,
): VarianceComponents[] {
  const first = components[0];
  if (!first) return [];
  const rf = runs / first.runs;
  const cf = canaries / first.canaries;
  return components.map((c) => ({
    ...c,
    run: c.run / rf,
    canary: c.canary / cf,
    residual: c.residual / (rf * cf),
    runs: c.runs * rf,
    canaries: c.canaries * cf,
  }));
}

/**
 * Assumed components of one arm's median when no pilot audit is given: run, canary and
 * run × canary standard deviations in bits (`sd`), crossed, at `runs` × `canaries`. The median of
 * normal canary effects costs π/2 times the variance of their mean; a run's effect moves the whole
 * run. A planning default only: a pilot audit's measured components replace it.
 */
export function assumedComponents(
  sd: { run: number; canary: number; interaction: number },
  runs: number,
  canaries: number,
): VarianceComponents {
  const efficiency = Math.PI / 2;
  return {
    design: 'crossed',
    run: (sd.run * sd.run) / runs,
    canary: (efficiency * sd.canary * sd.canary) / canaries,
    residual: (efficiency * sd.interaction * sd.interaction) / (runs * canaries),
    runs,
    canaries,
  };
}

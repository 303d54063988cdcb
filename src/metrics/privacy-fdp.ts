import { gdpMuFor, normalCdf, normalPpf } from './gaussian.js';
import type { EpsilonBound, ScoredCanary } from './privacy.js';
import { rocHull } from './privacy-gdp.js';
import { checkStrategy, splitStrategy, strategyLabel, type ThresholdStrategy } from './threshold-strategy.js';

/**
 * The f-DP one-run ε lower bound of Mahloujifar, Melis & Chaudhuri ("Auditing f-Differential
 * Privacy in One Run", arXiv 2410.22235), as google-deepmind/jax_privacy `jax_privacy/auditing.py`
 * implements it (`_epsilon_one_run_fdp`, `_gaussian_dp_blow_up_inverse`,
 * `CanaryScoreAuditor.epsilon_one_run_fdp`), with its threshold strategies
 * (`_audit_with_threshold_strategy`): Bonferroni over the ROC hull's thresholds, Split, and
 * MultiSplit (Meinshausen, Meier & Bühlmann 2009, arXiv 0811.2177, Theorem 3.1).
 *
 * The auditor guesses "member" for every canary scoring ≥ a threshold and abstains on the rest;
 * a tied block is always guessed whole. Like the binomial one-run bound of Steinke et al. it holds
 * only when each canary's inclusion was a fair coin.
 */

export { THRESHOLD_STRATEGIES, strategyLabel, thresholdStrategy } from './threshold-strategy.js';
export type { ThresholdStrategy } from './threshold-strategy.js';

const muCache = new Map<string, number>();
/** μ of the Gaussian mechanism at (ε, δ), memoised (the root search asks for the same ε often). */
function muFor(eps: number, delta: number): number {
  const key = `${eps}/${delta}`;
  let v = muCache.get(key);
  if (v === undefined) {
    if (muCache.size >= 10_000) muCache.clear();
    v = gdpMuFor(eps, delta);
    muCache.set(key, v);
  }
  return v;
}

/**
 * Positive when `correct` of `guesses` right guesses among m canaries falsify (ε, δ)-DP at
 * `significance` (read as μ-GDP with μ from (ε, δ)): `audit_rh_with_cap` of arXiv 2410.22235,
 * jax_privacy's `audit_objective`.
 */
export function fdpObjective(
  m: number,
  guesses: number,
  correct: number,
  significance: number,
  eps: number,
  delta: number,
): number {
  const mu = muFor(eps, delta);
  const blowUpInverse = (x: number): number =>
    mu === Infinity ? (x === 1 ? 1 : 0) : x >= 1 ? 1 : normalCdf(normalPpf(x) - mu);
  let r = (significance * correct) / m;
  let h = (significance * (guesses - correct)) / m;
  for (let i = correct - 1; i >= 0; i -= 1) {
    const hNew = Math.max(h, blowUpInverse(r));
    if (hNew === h) break;
    r = Math.min(r + (i / (guesses - i)) * (hNew - h), 1);
    h = hNew;
  }
  return r + h - guesses / m;
}

/**
 * The largest ε whose claim `correct`/`guesses` falsify, or `epsLo` when none above it is: doubling
 * then bisection to 1e-9 (jax_privacy: doubling then brentq to 1e-6).
 */
export function fdpEpsilon(
  epsLo: number,
  m: number,
  guesses: number,
  correct: number,
  significance: number,
  delta: number,
): number {
  if (guesses === 0) return epsLo;
  const f = (eps: number): number => fdpObjective(m, guesses, correct, significance, eps, delta);
  if (f(epsLo) <= 0) return epsLo;
  let lo = epsLo;
  let hi = Math.max(1, 2 * epsLo);
  while (f(hi) > 0) {
    lo = hi;
    hi *= 2;
    if (hi > 1e4) return lo;
  }
  while (hi - lo > 1e-9) {
    const mid = 0.5 * (lo + hi);
    if (f(mid) > 0) lo = mid;
    else hi = mid;
  }
  return lo;
}

interface ThresholdAudit {
  epsilon: number;
  threshold: number | null;
  guesses: number;
  correct: number;
  thresholds: number;
}

function count(canaries: readonly ScoredCanary[], threshold: number): { guesses: number; correct: number } {
  let guesses = 0;
  let correct = 0;
  for (const c of canaries) {
    if (c.score >= threshold) {
      guesses += 1;
      if (c.member) correct += 1;
    }
  }
  return { guesses, correct };
}

/**
 * The best threshold of the hull at `significance` each (or the given threshold): jax_privacy's
 * `_epsilon_one_run_all_thresholds` with `use_fdp=True`. Candidates go by decreasing raw
 * precision; one whose precision is ≤ logistic(best ε) cannot beat it and is skipped.
 */
function auditThresholds(
  canaries: readonly ScoredCanary[],
  significance: number,
  delta: number,
  threshold: number | null,
): ThresholdAudit | null {
  const h = rocHull(canaries);
  if (!h) return null;
  const m = h.nIn + h.nOut;
  if (threshold !== null) {
    const g = count(canaries, threshold);
    return { epsilon: fdpEpsilon(0, m, g.guesses, g.correct, significance, delta), threshold, ...g, thresholds: 1 };
  }
  const cands = h.thresholds.map((t, i) => ({
    t,
    correct: h.nIn - (h.fn[i] as number),
    guesses: h.nIn - (h.fn[i] as number) + h.nOut - (h.tn[i] as number),
  }));
  cands.sort((a, b) => b.correct * a.guesses - a.correct * b.guesses || b.guesses - a.guesses);
  let best: ThresholdAudit = { epsilon: 0, threshold: null, guesses: 0, correct: 0, thresholds: h.thresholds.length };
  let bestQ = 0.5;
  for (const c of cands) {
    if (c.guesses === 0 || c.correct / c.guesses <= bestQ) continue;
    const eps = fdpEpsilon(best.epsilon, m, c.guesses, c.correct, significance, delta);
    if (eps > best.epsilon) {
      best = { epsilon: eps, threshold: c.t, guesses: c.guesses, correct: c.correct, thresholds: h.thresholds.length };
      bestQ = 1 / (1 + Math.exp(-eps));
    }
  }
  return best;
}

function singleSplit(
  choose: ScoredCanary[],
  audit: ScoredCanary[],
  significance: number,
  delta: number,
): ThresholdAudit | null {
  const chosen = auditThresholds(choose, significance, delta, null);
  if (!chosen) return null;
  // No threshold falsified anything on the first half: nothing to test on the second.
  if (chosen.threshold === null) return { ...chosen, epsilon: 0, guesses: 0, correct: 0 };
  return auditThresholds(audit, significance, delta, chosen.threshold);
}

export interface FdpOneRunBound extends EpsilonBound {
  /** Canaries in the randomized pool. */
  m: number;
  /** Guesses ("member" for scores ≥ the threshold) and how many were right (Bonferroni and Split). */
  guesses: number;
  correct: number;
  threshold: number | null;
  /** `bonferroni`, `split(…)` or `multisplit(…)`. */
  threshold_strategy: string;
}

/**
 * The f-DP one-run ε lower bound at δ and `confidence`, the threshold chosen by `strategy`:
 * Bonferroni (default) audits every hull threshold at (1 − confidence)/T; Split chooses the
 * threshold on one part and audits it on the other; MultiSplit reports the median of `samples`
 * Split bounds each at (1 − confidence)/2 (Meinshausen et al. 2009: twice the median p-value is a
 * valid p-value). Null without both members and non-members.
 */
export function fdpOneRunBound(
  canaries: readonly ScoredCanary[],
  delta: number,
  confidence = 0.95,
  strategy: ThresholdStrategy = { kind: 'bonferroni' },
): FdpOneRunBound | null {
  if (!(delta > 0 && delta <= 1)) throw new RangeError(`fdpOneRunBound: delta must be in (0, 1], got ${delta}`);
  const significance = 1 - confidence;
  if (!(significance > 0 && significance < 1))
    throw new RangeError(`fdpOneRunBound: confidence must be in (0, 1), got ${confidence}`);
  const m = canaries.length;
  const label = strategyLabel(strategy);
  const base = { delta, confidence, m, threshold_strategy: label };
  if (strategy.kind === 'bonferroni') {
    const h = rocHull(canaries);
    if (!h) return null;
    const a = auditThresholds(canaries, significance / h.thresholds.length, delta, null);
    return (
      a && {
        ...base,
        epsilon: a.epsilon,
        thresholds: a.thresholds,
        guesses: a.guesses,
        correct: a.correct,
        threshold: a.threshold,
      }
    );
  }
  checkStrategy(strategy, 'fdpOneRunBound');
  if (!rocHull(canaries)) return null;
  const s = splitStrategy(canaries, significance, strategy, (a, b, sig) => singleSplit(a, b, sig, delta));
  if (s.kind === 'split')
    return (
      s.result && {
        ...base,
        epsilon: s.result.epsilon,
        thresholds: 1,
        guesses: s.result.guesses,
        correct: s.result.correct,
        threshold: s.result.threshold,
      }
    );
  return { ...base, epsilon: s.epsilon, thresholds: 1, guesses: 0, correct: 0, threshold: null };
}

import { betaQuantile } from './distributions.js';
import { gdpEpsilonAt, normalIsf, normalPpf } from './gaussian.js';
import type { EpsilonBound, ScoredCanary } from './privacy.js';

/**
 * The Gaussian-DP ε lower bound and the ROC convex hull it (and the f-DP one-run bound) searches,
 * after google-deepmind/jax_privacy `jax_privacy/auditing.py` (`_get_tn_fn_counts`,
 * `_pareto_frontier`, `CanaryScoreAuditor.epsilon_from_gdp`, `attack_auroc`).
 *
 * Decision rule: a canary scoring ≥ the threshold is guessed "member". Thresholds are the distinct
 * scores and +∞; a tied block is always on one side of a threshold, so no readout here depends on
 * the input's order. Only thresholds on the upper convex hull of (FN, TN) are kept: a point under
 * the hull is beaten by randomizing between its neighbours, and the hull is the set the
 * Bonferroni factor counts (as in jax_privacy, where `len(self._fn_counts)` is the hull's size).
 */

export interface RocHull {
  /** Thresholds on the hull, increasing (the last is +∞). */
  thresholds: number[];
  /** Members scoring below each threshold (false negatives). */
  fn: number[];
  /** Non-members scoring below each threshold (true negatives). */
  tn: number[];
  nIn: number;
  nOut: number;
}

/** Count of sorted values strictly below x (binary search). */
function countBelow(sorted: readonly number[], x: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The (FN, TN) points of every threshold, reduced to the strict upper convex hull (collinear and
 * dominated points dropped: Andrew's monotone chain; jax_privacy's `_pareto_frontier` reaches the
 * same set by repeated neighbour elimination). Null without both members and non-members.
 */
export function rocHull(canaries: readonly ScoredCanary[]): RocHull | null {
  const ins: number[] = [];
  const outs: number[] = [];
  for (const c of canaries) {
    if (!Number.isFinite(c.score)) throw new RangeError(`rocHull: scores must be finite numbers, got ${c.score}`);
    (c.member ? ins : outs).push(c.score);
  }
  if (ins.length === 0 || outs.length === 0) return null;
  ins.sort((a, b) => a - b);
  outs.sort((a, b) => a - b);
  const distinct = [...new Set([...ins, ...outs])].sort((a, b) => a - b);
  distinct.push(Infinity);
  const hull: { t: number; fn: number; tn: number }[] = [];
  const cross = (a: { fn: number; tn: number }, b: { fn: number; tn: number }, c: { fn: number; tn: number }): number =>
    (b.tn - a.tn) * (c.fn - b.fn) - (c.tn - b.tn) * (b.fn - a.fn);
  for (const t of distinct) {
    const p = { t, fn: countBelow(ins, t), tn: countBelow(outs, t) };
    while (
      hull.length >= 2 &&
      cross(hull[hull.length - 2] as (typeof hull)[number], hull[hull.length - 1] as (typeof hull)[number], p) <= 0
    )
      hull.pop();
    hull.push(p);
  }
  return {
    thresholds: hull.map((h) => h.t),
    fn: hull.map((h) => h.fn),
    tn: hull.map((h) => h.tn),
    nIn: ins.length,
    nOut: outs.length,
  };
}

/** One-sided Clopper–Pearson upper bound on a rate from k of n at level `significance` (1 at k = n). */
export function clopperPearsonUpper(k: number, n: number, significance: number): number {
  return k < n ? betaQuantile(1 - significance, k + 1, n - k) : 1;
}

/**
 * Area under the ROC convex hull (jax_privacy's `attack_auroc`: the AUROC of the best classifier
 * that may randomize between two thresholds). It is never below ½, and it exceeds the Mann–Whitney
 * AUC (`membershipAuc`) where the empirical ROC is not concave.
 */
export function hullAuc(canaries: readonly ScoredCanary[]): number | null {
  const h = rocHull(canaries);
  if (!h) return null;
  let area = 0;
  for (let i = 1; i < h.fn.length; i += 1) {
    const tnr0 = (h.tn[i - 1] as number) / h.nOut;
    const tnr1 = (h.tn[i] as number) / h.nOut;
    area += 0.5 * (tnr0 + tnr1) * (((h.fn[i] as number) - (h.fn[i - 1] as number)) / h.nIn);
  }
  return area;
}

export interface GdpBound extends EpsilonBound {
  /** The μ lower bound (μ-GDP) the ε is converted from; 0 when the data show none. */
  mu: number;
  /** The hull threshold that gave μ (null when μ = 0). */
  threshold: number | null;
  /** How the threshold was chosen: always Bonferroni over the 2 × hull bounds, as jax_privacy. */
  threshold_strategy: 'bonferroni';
}

/**
 * ε lower bound through Gaussian DP (Nasr et al. 2023, arXiv 2302.07956; Dong, Roth & Su 2019):
 * at each hull threshold, Clopper–Pearson upper bounds on FPR and FNR, each at
 * (1 − confidence)/(2T) for T hull thresholds (Bonferroni); μ ≥ Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi)
 * (Dong et al. Eq. 6), maximised over thresholds whose bounds both stay below 1 − δ; a μ ≤ 0 is no
 * evidence (ε = 0, the fix of jax_privacy PR #270); else ε solves δ_μ(ε) = δ.
 */
export function gdpEpsilon(canaries: readonly ScoredCanary[], delta: number, confidence = 0.95): GdpBound | null {
  if (!(delta > 0 && delta <= 1)) throw new RangeError(`gdpEpsilon: delta must be in (0, 1], got ${delta}`);
  const significance = 1 - confidence;
  if (!(significance > 0 && significance < 0.5))
    throw new RangeError(`gdpEpsilon: confidence must be in (0.5, 1), got ${confidence}`);
  const h = rocHull(canaries);
  if (!h) return null;
  const T = h.fn.length;
  const each = significance / (2 * T);
  let mu = 0;
  let threshold: number | null = null;
  for (let i = 0; i < T; i += 1) {
    const fnrHi = clopperPearsonUpper(h.fn[i] as number, h.nIn, each);
    if (fnrHi >= 1 - delta) continue;
    const fprHi = clopperPearsonUpper(h.nOut - (h.tn[i] as number), h.nOut, each);
    if (fprHi >= 1 - delta) continue;
    const m = normalIsf(fprHi) - normalPpf(fnrHi);
    if (m > mu) {
      mu = m;
      threshold = h.thresholds[i] as number;
    }
  }
  const epsilon = mu > 0 ? gdpEpsilonAt(mu, delta) : 0;
  return { epsilon, delta, confidence, thresholds: T, mu, threshold, threshold_strategy: 'bonferroni' };
}

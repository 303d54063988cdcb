import { betaIncomplete, clopperPearson, logGamma } from './distributions.js';
import { checkStrategy, splitStrategy, strategyLabel, type ThresholdStrategy } from './threshold-strategy.js';
import { normalQuantile } from './wilson.js';

/**
 * Privacy readouts from the same canaries the exposure figures use: the membership score of a
 * canary is its exposure (higher: more likely trained on); inserted canaries are members,
 * held-out ones are not.
 *
 * - AUC (Mann–Whitney, ties count ½) with DeLong's variance and a normal interval;
 * - TPR at a target FPR: the threshold lets at most ⌊FPR·n_out⌋ non-members through; the TPR at
 *   it with a Clopper–Pearson interval (conditional on the threshold);
 * - an empirical ε lower bound at δ: for every threshold, Clopper–Pearson bounds on its FPR and
 *   TPR, ε ≥ max(ln((TPR_lo − δ)/FPR_hi), ln((1 − FPR_hi − δ)/(1 − TPR_lo))) (the hypothesis-test
 *   view of (ε, δ)-DP, Kairouz et al. 2015; used for auditing by Jagielski et al. 2020 and Nasr et
 *   al. 2021), the confidence split over every threshold searched (Bonferroni; or Split, MultiSplit:
 *   `threshold-strategy.ts`);
 * - the one-run bound of Steinke, Nasr & Jagielski (2023, "Privacy Auditing with One (1) Training
 *   Run", Appendix D): valid only when each canary's inclusion was a fair coin.
 *
 * Ties: no readout lets the order of its input decide anything. AUC counts a tie ½; the TPR
 * threshold passes only scores strictly above the bar, so a block tied at the bar is never split
 * in the members' favour; the Clopper–Pearson search counts every score ≥ the threshold; the
 * one-run auditor abstains on a tied block that straddles its cut.
 */
export interface ScoredCanary {
  score: number;
  member: boolean;
}

export interface Interval {
  estimate: number;
  lo: number;
  hi: number;
}

/** AUC of members over non-members with DeLong's variance; null without both kinds. */
export function membershipAuc(canaries: readonly ScoredCanary[], confidence = 0.95): Interval | null {
  const xs = canaries.filter((c) => c.member).map((c) => c.score);
  const ys = canaries.filter((c) => !c.member).map((c) => c.score);
  const m = xs.length;
  const n = ys.length;
  if (m === 0 || n === 0) return null;
  // Half-credits are integers, and the components are summed in sorted order: the same pool in
  // another order gives the same bits.
  const credits = (x: number, y: number): number => (x > y ? 2 : x === y ? 1 : 0);
  const v10 = xs.map((x) => ys.reduce((a, y) => a + credits(x, y), 0) / (2 * n)).sort((a, b) => a - b);
  const v01 = ys.map((y) => xs.reduce((a, x) => a + credits(x, y), 0) / (2 * m)).sort((a, b) => a - b);
  const auc = xs.reduce((a, x) => a + ys.reduce((b, y) => b + credits(x, y), 0), 0) / (2 * m * n);
  const s10 = m > 1 ? v10.reduce((a, v) => a + (v - auc) ** 2, 0) / (m - 1) : 0;
  const s01 = n > 1 ? v01.reduce((a, v) => a + (v - auc) ** 2, 0) / (n - 1) : 0;
  const se = Math.sqrt(s10 / m + s01 / n);
  const z = normalQuantile(1 - (1 - confidence) / 2);
  return { estimate: auc, lo: Math.max(0, auc - z * se), hi: Math.min(1, auc + z * se) };
}

export interface TprAtFpr {
  /** The FPR asked for. */
  fpr: number;
  /** The FPR the threshold reached on these non-members (≤ the target). */
  achieved_fpr: number;
  /** Smallest FPR these non-members can resolve: 1 / n_out. */
  resolution: number;
  k: number;
  n: number;
  tpr: number;
  lo: number;
  hi: number;
}

/** TPR at the loosest threshold whose FPR on the non-members stays at or below `fpr`. */
export function tprAtFpr(canaries: readonly ScoredCanary[], fpr: number, confidence = 0.95): TprAtFpr | null {
  const members = canaries.filter((c) => c.member).map((c) => c.score);
  const others = canaries
    .filter((c) => !c.member)
    .map((c) => c.score)
    .sort((a, b) => b - a);
  if (members.length === 0 || others.length === 0) return null;
  const allowed = Math.floor(fpr * others.length + 1e-9);
  // Scores strictly above the (allowed + 1)-th highest non-member pass: at most `allowed` do.
  const bar = allowed < others.length ? (others[allowed] as number) : -Infinity;
  const passedOthers = others.filter((s) => s > bar).length;
  const k = members.filter((s) => s > bar).length;
  const ci = clopperPearson(k, members.length, confidence);
  return {
    fpr,
    achieved_fpr: passedOthers / others.length,
    resolution: 1 / others.length,
    k,
    n: members.length,
    tpr: k / members.length,
    lo: ci.lo,
    hi: ci.hi,
  };
}

export interface EpsilonBound {
  /** Lower bound on ε (0 when the data cannot exclude ε = 0). */
  epsilon: number;
  delta: number;
  confidence: number;
  /** Thresholds searched (the Bonferroni factor of the Clopper–Pearson bound; 1 under split and multisplit). */
  thresholds: number;
  /** How the threshold was chosen: `bonferroni`, `split(…)` or `multisplit(…)` (`strategyLabel`). */
  threshold_strategy?: string;
}

/**
 * Clopper–Pearson intervals by (k, n, level): the report computes this bound for every run (the
 * null comparisons), and runs of one audit share their n and level, so the few distinct (k, n)
 * are worked out once. Bounded: cleared when full.
 */
const cpMemo = new Map<string, { lo: number; hi: number }>();
function clopperPearsonMemo(k: number, n: number, confidence: number): { lo: number; hi: number } {
  const key = `${k}/${n}/${confidence}`;
  let v = cpMemo.get(key);
  if (v === undefined) {
    if (cpMemo.size >= 100_000) cpMemo.clear();
    v = clopperPearson(k, n, confidence);
    cpMemo.set(key, v);
  }
  return v;
}

/**
 * ε from Clopper–Pearson bounds on `tp` of `nIn` members and `fp` of `nOut` non-members guessed
 * "member" at one threshold, each interval two-sided at `level` (so TPR_lo and FPR_hi each one-sided
 * at (1 − level)/2): the forward and the reverse rule both follow from those two bounds.
 */
function clopperPearsonAt(tp: number, nIn: number, fp: number, nOut: number, level: number, delta: number): number {
  const tpr = clopperPearsonMemo(tp, nIn, level);
  const fprB = clopperPearsonMemo(fp, nOut, level);
  const a = tpr.lo - delta > 0 && fprB.hi > 0 ? Math.log((tpr.lo - delta) / fprB.hi) : 0;
  // FNR = 1 − TPR: its upper bound is 1 − TPR_lo.
  const b = 1 - fprB.hi - delta > 0 && 1 - tpr.lo > 0 ? Math.log((1 - fprB.hi - delta) / (1 - tpr.lo)) : 0;
  return Math.max(0, a, b);
}

/** Scores ≥ t in an ascending list (binary search). */
function countAtLeast(ascending: readonly number[], t: number): number {
  let lo = 0;
  let hi = ascending.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((ascending[mid] as number) < t) lo = mid + 1;
    else hi = mid;
  }
  return ascending.length - lo;
}

/**
 * The best threshold among the distinct scores at `level` each (a canary scoring ≥ it is guessed
 * "member"), or a null threshold when none gives ε > 0; `members` and `others` ascending. The
 * raw rates bound each threshold's ε from above (TPR_lo ≤ TPR, FPR_hi ≥ FPR), so thresholds are
 * tried by decreasing raw ε and the search stops once that cannot beat the best: the same maximum
 * as trying all, for a fraction of the Clopper–Pearson inversions. Ties go to the lowest threshold.
 */
function clopperPearsonSearch(
  members: readonly number[],
  others: readonly number[],
  level: number,
  delta: number,
): { epsilon: number; threshold: number | null } {
  const nIn = members.length;
  const nOut = others.length;
  const cands = distinctScores(members, others).map((t) => {
    const tp = countAtLeast(members, t);
    const fp = countAtLeast(others, t);
    const tpr = tp / nIn;
    const fpr = fp / nOut;
    const forward = tpr - delta > 0 ? (fp === 0 ? Infinity : Math.log((tpr - delta) / fpr)) : 0;
    const reverse = 1 - fpr - delta > 0 ? (tp === nIn ? Infinity : Math.log((1 - fpr - delta) / (1 - tpr))) : 0;
    return { t, tp, fp, raw: Math.max(forward, reverse) };
  });
  cands.sort((a, b) => b.raw - a.raw || a.t - b.t);
  let best = 0;
  let threshold: number | null = null;
  for (const c of cands) {
    if (c.raw <= best) break;
    const eps = clopperPearsonAt(c.tp, nIn, c.fp, nOut, level, delta);
    if (eps > best || (eps === best && eps > 0 && c.t < (threshold as number))) {
      best = eps;
      threshold = c.t;
    }
  }
  return { epsilon: best, threshold };
}

const distinctScores = (members: readonly number[], others: readonly number[]): number[] =>
  [...new Set([...members, ...others])].sort((a, b) => a - b);

const scoresOf = (canaries: readonly ScoredCanary[], member: boolean): number[] =>
  canaries
    .filter((c) => c.member === member)
    .map((c) => c.score)
    .sort((a, b) => a - b);

/**
 * The Clopper–Pearson ε lower bound, the threshold chosen by `strategy` (`threshold-strategy.ts`):
 * Bonferroni (default) over every distinct score; Split chooses the threshold on one part and
 * audits it alone on the other at the full level; MultiSplit takes the median of split bounds at
 * half the level (jax_privacy `epsilon_clopper_pearson` with `threshold_strategy`).
 */
export function clopperPearsonEpsilon(
  canaries: readonly ScoredCanary[],
  delta: number,
  confidence = 0.95,
  strategy: ThresholdStrategy = { kind: 'bonferroni' },
): EpsilonBound | null {
  const members = scoresOf(canaries, true);
  const others = scoresOf(canaries, false);
  if (members.length === 0 || others.length === 0) return null;
  const threshold_strategy = strategyLabel(strategy);
  if (strategy.kind === 'bonferroni') {
    const thresholds = distinctScores(members, others).length;
    // Two bounds per threshold, each one-sided at (1 − confidence)/(2T): a two-sided interval at 1 − (1 − confidence)/T.
    const best = clopperPearsonSearch(members, others, 1 - (1 - confidence) / thresholds, delta);
    return { epsilon: best.epsilon, delta, confidence, thresholds, threshold_strategy };
  }
  checkStrategy(strategy, 'clopperPearsonEpsilon');
  const s = splitStrategy(canaries, 1 - confidence, strategy, (choose, audit, significance) => {
    const cIn = scoresOf(choose, true);
    const cOut = scoresOf(choose, false);
    const aIn = scoresOf(audit, true);
    const aOut = scoresOf(audit, false);
    if (cIn.length === 0 || cOut.length === 0 || aIn.length === 0 || aOut.length === 0) return null;
    const chosen = clopperPearsonSearch(cIn, cOut, 1 - significance, delta);
    // No threshold gave evidence on the first part: nothing to test on the second.
    if (chosen.threshold === null) return { epsilon: 0 };
    const t = chosen.threshold;
    return {
      epsilon: clopperPearsonAt(
        countAtLeast(aIn, t),
        aIn.length,
        countAtLeast(aOut, t),
        aOut.length,
        1 - significance,
        delta,
      ),
    };
  });
  const epsilon = s.kind === 'split' ? s.result?.epsilon : s.epsilon;
  return epsilon === undefined ? null : { epsilon, delta, confidence, thresholds: 1, threshold_strategy };
}

function logBinomialPmf(k: number, n: number, q: number): number {
  if (q <= 0) return k === 0 ? 0 : -Infinity;
  if (q >= 1) return k === n ? 0 : -Infinity;
  return logGamma(n + 1) - logGamma(k + 1) - logGamma(n - k + 1) + k * Math.log(q) + (n - k) * Math.log1p(-q);
}

/** P[Binomial(n, q) ≥ k]. */
function binomialUpperTail(k: number, n: number, q: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  return betaIncomplete(q, k, n - k + 1);
}

/**
 * p-value of ≥ v correct guesses out of r (m canaries, each included by a fair coin) under the
 * null hypothesis that training is (ε, δ)-DP: Steinke, Nasr & Jagielski (2023), Appendix D,
 * `p_value_DP_audit`.
 */
export function oneRunPValue(m: number, r: number, v: number, eps: number, delta: number): number {
  if (!(0 <= v && v <= r && r <= m))
    throw new RangeError(`oneRunPValue: need 0 <= v <= r <= m, got v=${v}, r=${r}, m=${m}`);
  const q = 1 / (1 + Math.exp(-eps));
  const beta = binomialUpperTail(v, r, q);
  if (delta === 0) return Math.min(beta, 1);
  let alpha = 0;
  let sum = 0;
  for (let i = 1; i <= v; i += 1) {
    sum += Math.exp(logBinomialPmf(v - i, r, q));
    if (sum > i * alpha) alpha = sum / i;
  }
  return Math.min(beta + alpha * delta * 2 * m, 1);
}

/** The largest ε the one-run audit rejects at level p = 1 − confidence (bisection, as `get_eps_audit`). */
export function oneRunEpsilon(m: number, r: number, v: number, delta: number, p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`oneRunEpsilon: p must be in (0, 1), got ${p}`);
  let lo = 0;
  if (oneRunPValue(m, r, v, 0, delta) >= p) return 0;
  let hi = 1;
  while (oneRunPValue(m, r, v, hi, delta) < p && hi < 1e3) hi *= 2;
  for (let i = 0; i < 60; i += 1) {
    const mid = 0.5 * (lo + hi);
    if (oneRunPValue(m, r, v, mid, delta) < p) lo = mid;
    else hi = mid;
  }
  return lo;
}

export interface OneRunBound extends EpsilonBound {
  /** Canaries in the randomized pool. */
  m: number;
  /** Guesses made ("in" for the highest scores, "out" for the lowest) and how many were right. */
  guesses: number;
  correct: number;
  /**
   * Canaries the chosen r would have guessed but that tie, at the cut, with canaries it would not:
   * no guess is made for them (their order is the input's, not the model's).
   */
  abstained: number;
}

/**
 * The guesses for r: "in" for the r/2 highest scores, "out" for the r/2 lowest — except that a
 * block of tied scores straddling either cut gets no guess at all (abstention), so which tied
 * canary falls on which side of the cut is never decided by input order. The guesses are then a
 * function of the score multiset only, as the one-run theorem requires of the auditor; fewer
 * guesses only weaken the bound.
 */
export function oneRunGuesses(
  desc: readonly ScoredCanary[],
  r: number,
): { guesses: number; correct: number; abstained: number } {
  const m = desc.length;
  const half = r / 2;
  // half < m always (r <= m, half <= m/2), so both bars exist.
  const inBar = (desc[half] as ScoredCanary).score;
  const outBar = (desc[m - half - 1] as ScoredCanary).score;
  const ins = desc.filter((c) => c.score > inBar);
  const outs = desc.filter((c) => c.score < outBar);
  const guesses = ins.length + outs.length;
  return {
    guesses,
    correct: ins.filter((c) => c.member).length + outs.filter((c) => !c.member).length,
    abstained: r - guesses,
  };
}

/** The guess fractions r/m the one-run bound chooses among. */
const ONE_RUN_FRACTIONS = [1 / 8, 1 / 4, 1 / 2, 1] as const;

/** r for a pool of m ≥ 2 and a fraction: m·fraction rounded down to even, at least 2 (so at most m). */
function guessCount(m: number, fraction: number): number {
  return Math.max(2, 2 * Math.floor((m * fraction) / 2));
}

/** The best guess fraction on a pool at level p each, with the guesses it made (first best wins). */
function oneRunSearch(
  sorted: readonly ScoredCanary[],
  delta: number,
  p: number,
): { epsilon: number; fraction: number; guesses: number; correct: number; abstained: number } {
  const m = sorted.length;
  const seen = new Set<number>();
  let best: ReturnType<typeof oneRunSearch> | null = null;
  for (const fraction of ONE_RUN_FRACTIONS) {
    const r = guessCount(m, fraction);
    if (seen.has(r)) continue;
    seen.add(r);
    const g = oneRunGuesses(sorted, r);
    const eps = oneRunEpsilon(m, g.guesses, g.correct, delta, p);
    if (best === null || eps > best.epsilon) best = { epsilon: eps, fraction, ...g };
  }
  return best as NonNullable<typeof best>;
}

const oneRunUsable = (canaries: readonly ScoredCanary[]): boolean =>
  canaries.length >= 2 && canaries.some((c) => c.member) && !canaries.every((c) => c.member);

const byScoreDesc = (canaries: readonly ScoredCanary[]): ScoredCanary[] =>
  [...canaries].sort((a, b) => b.score - a.score);

/**
 * The one-run bound with the auditor guessing "in" for the r/2 highest scores and "out" for the
 * r/2 lowest, abstaining on a tied block that straddles a cut. r is chosen among m/8, m/4, m/2
 * and m (rounded down to even, at least 2), by `strategy`: Bonferroni (default) splits the level
 * over those choices, so choosing the best after looking stays valid; Split chooses the fraction
 * r/m on one part of the pool and audits that fraction of the other part alone (its m is that
 * part's size: the first part's coins are then known, the second's still fair); MultiSplit takes
 * the median of split bounds at half the level.
 */
export function oneRunBound(
  canaries: readonly ScoredCanary[],
  delta: number,
  confidence = 0.95,
  strategy: ThresholdStrategy = { kind: 'bonferroni' },
): OneRunBound | null {
  const m = canaries.length;
  if (!oneRunUsable(canaries)) return null;
  const threshold_strategy = strategyLabel(strategy);
  if (strategy.kind === 'bonferroni') {
    const choices = new Set(ONE_RUN_FRACTIONS.map((f) => guessCount(m, f))).size;
    const b = oneRunSearch(byScoreDesc(canaries), delta, (1 - confidence) / choices);
    return {
      epsilon: b.epsilon,
      delta,
      confidence,
      thresholds: choices,
      m,
      guesses: b.guesses,
      correct: b.correct,
      abstained: b.abstained,
      threshold_strategy,
    };
  }
  checkStrategy(strategy, 'oneRunBound');
  const s = splitStrategy(canaries, 1 - confidence, strategy, (choose, audit, p) => {
    if (!oneRunUsable(choose) || !oneRunUsable(audit)) return null;
    const chosen = oneRunSearch(byScoreDesc(choose), delta, p);
    // No fraction gave evidence on the first part: nothing to test on the second.
    if (chosen.epsilon === 0) return { epsilon: 0, guesses: 0, correct: 0, abstained: 0 };
    const g = oneRunGuesses(byScoreDesc(audit), guessCount(audit.length, chosen.fraction));
    return { epsilon: oneRunEpsilon(audit.length, g.guesses, g.correct, delta, p), ...g };
  });
  const base = { delta, confidence, thresholds: 1, m, threshold_strategy };
  if (s.kind === 'multisplit') return { ...base, epsilon: s.epsilon, guesses: 0, correct: 0, abstained: 0 };
  return s.result && { ...base, ...s.result };
}

import { Rng } from '../random.js';

/** A canary as the strategies see it (privacy.ts's `ScoredCanary`; that file imports this one). */
interface Scored {
  score: number;
  member: boolean;
}

/**
 * How an ε lower bound picks the threshold (or guess count) it reports, after google-deepmind/
 * jax_privacy `jax_privacy/auditing.py` (`Bonferroni`, `Split`, `MultiSplit`,
 * `_audit_with_threshold_strategy`, `_random_partition`):
 *
 * - `bonferroni`: every candidate is tested on the whole pool at α/T (T candidates) and the best
 *   is reported; the bound does this itself;
 * - `split`: the members and the non-members are each cut at ⌊fraction · n⌋ after a seeded shuffle;
 *   the candidate is chosen on the first part at α (only the choice is made there, so no
 *   correction) and tested on the second part at α;
 * - `multisplit`: the median of `samples` split bounds, each at α/2. Meinshausen, Meier & Bühlmann
 *   (2009, arXiv 0811.2177, Theorem 3.1 with γ = ½): twice the median of the split p-values is a
 *   valid p-value, so the median of bounds at α/2 holds at α.
 *
 * jax_privacy applies these to its Clopper–Pearson, one-run and f-DP one-run bounds, not to its
 * GDP bound; its `Explicit` strategy (a threshold fixed in advance) is not offered here.
 */

export type ThresholdStrategy =
  | { kind: 'bonferroni' }
  | { kind: 'split'; fraction: number; seed: number }
  | { kind: 'multisplit'; fraction: number; seed: number; samples: number };

export const THRESHOLD_STRATEGIES = ['bonferroni', 'split', 'multisplit'] as const;

/** The strategy of a name with jax_privacy's defaults (fraction ½, 100 splits). */
export function thresholdStrategy(name: (typeof THRESHOLD_STRATEGIES)[number], seed = 0): ThresholdStrategy {
  if (name === 'bonferroni') return { kind: 'bonferroni' };
  if (name === 'split') return { kind: 'split', fraction: 0.5, seed };
  if (name === 'multisplit') return { kind: 'multisplit', fraction: 0.5, seed, samples: 100 };
  throw new RangeError(`unknown threshold strategy '${String(name)}' (one of: ${THRESHOLD_STRATEGIES.join(', ')})`);
}

/** Name of a strategy as the report prints it: `bonferroni`, `split(0.5, seed 0)`, `multisplit(100 × 0.5, seed 0)`. */
export function strategyLabel(s: ThresholdStrategy): string {
  if (s.kind === 'bonferroni') return 'bonferroni';
  if (s.kind === 'split') return `split(${s.fraction}, seed ${s.seed})`;
  return `multisplit(${s.samples} × ${s.fraction}, seed ${s.seed})`;
}

/** Throws, naming the bound and the field, on a split fraction outside (0, 1) or a bad sample count. */
export function checkStrategy(s: ThresholdStrategy, bound: string): void {
  if (s.kind === 'bonferroni') return;
  if (!(s.fraction > 0 && s.fraction < 1))
    throw new RangeError(`${bound}: split fraction must be in (0, 1), got ${s.fraction}`);
  if (s.kind === 'multisplit' && !(Number.isInteger(s.samples) && s.samples >= 1))
    throw new RangeError(`${bound}: multisplit samples must be a positive integer, got ${s.samples}`);
}

/**
 * Members and non-members each split at ⌊fraction · n⌋ after a seeded shuffle (jax_privacy's
 * `_random_partition`, members first). Each group is sorted by score before the shuffle, so the
 * split depends on the seed and the score multiset, not on the input order.
 */
export function splitPool<C extends Scored>(canaries: readonly C[], fraction: number, rng: Rng): [C[], C[]] {
  const a: C[] = [];
  const b: C[] = [];
  for (const member of [true, false]) {
    const group = canaries.filter((c) => c.member === member).sort((x, y) => x.score - y.score);
    rng.shuffle(group);
    const cut = Math.floor(group.length * fraction);
    // A loop, not push(...slice): spreading a large pool overflows the call stack.
    for (let i = 0; i < group.length; i += 1) (i < cut ? a : b).push(group[i] as C);
  }
  return [a, b];
}

/** Median of a non-empty list (mean of the middle two for an even count, as numpy's). */
export function median(values: readonly number[]): number {
  const v = [...values].sort((a, b) => a - b);
  const n = v.length;
  return n % 2 === 1 ? (v[(n - 1) / 2] as number) : 0.5 * ((v[n / 2 - 1] as number) + (v[n / 2] as number));
}

/**
 * One split audit: `choose` picks on the first part at `significance` (null: nothing can be chosen
 * there), `audit` tests the choice on the second part at `significance`.
 */
export type SplitAudit<C, R> = (choose: C[], audit: C[], significance: number) => R | null;

/**
 * The split and multisplit bounds of a pool: `split` runs one split audit at α; `multisplit` the
 * median ε of `samples` split audits at α/2 (a split that cannot be audited counts 0), all drawing
 * their partitions from one stream seeded by `strategy.seed`.
 */
export function splitStrategy<C extends Scored, R extends { epsilon: number }>(
  canaries: readonly C[],
  significance: number,
  strategy: Exclude<ThresholdStrategy, { kind: 'bonferroni' }>,
  single: SplitAudit<C, R>,
): { kind: 'split'; result: R | null } | { kind: 'multisplit'; epsilon: number } {
  const rng = Rng.fromSeed(strategy.seed);
  if (strategy.kind === 'split') {
    const [a, b] = splitPool(canaries, strategy.fraction, rng);
    return { kind: 'split', result: single(a, b, significance) };
  }
  const values: number[] = [];
  for (let i = 0; i < strategy.samples; i += 1) {
    const [a, b] = splitPool(canaries, strategy.fraction, rng);
    values.push(single(a, b, significance / 2)?.epsilon ?? 0);
  }
  return { kind: 'multisplit', epsilon: median(values) };
}

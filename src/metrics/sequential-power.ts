import type { VarianceComponents } from './bootstrap.js';
import type { Look } from './sequential.js';
import { decisionProbability, rescaleComponents, scaledVariance } from './verdict.js';

/**
 * Power of sequential replicates (`replicates: {until: decided, min, max}`) for one comparison, in
 * closed form per look: at look k (n_k seeds per cell, own level α_k from the spending schedule)
 * the comparison's components are rescaled to n_k seeds and read as `decisionProbability` at α_k,
 * p_k. The looks are then treated as **independent** tests:
 *   P(decided by max) ≈ 1 − Π_k (1 − p_k),
 *   E[seeds] ≈ n_1 + Σ_{k ≥ 2} (n_k − n_{k−1}) · Π_{j < k} (1 − p_j).
 * The looks are not independent (a look's runs are a prefix of the next look's), and positive
 * correlation between them makes a later look decide less often after an undecided earlier one
 * than independence says: the approximation tends to overstate P(decided) and understate the
 * seeds. A bound that holds whatever the correlation is `at_least` = max_k p_k (the chance of a
 * union is at least each part's). Multiplicity (the audit's Holm over the comparisons still open
 * at a look) is not modelled, as in the fixed plan. bench/sequential.ts compares both with
 * simulation (docs/metrics.md, "Sequential replicates").
 */
export interface SequentialLookPower {
  look: number;
  seeds: number;
  alpha: number;
  /** Decision probability of this look read by itself at its own α. */
  probability: number;
}

export interface SequentialPower {
  /** P(decided by max), looks as independent tests at their own α_k. */
  probability: number;
  /** P(decided by max) is at least this: the best single look's probability. */
  at_least: number;
  /** Expected seeds per cell when the comparison stops (decided, or max), looks as independent. */
  expected_seeds: number;
  looks: SequentialLookPower[];
}

/**
 * `components` measured (or assumed) at any size; `canaries` focal canaries per run. Null when the
 * components cannot say (none, or one run per arm: no run-to-run variance).
 */
export function sequentialPower(
  effect: number,
  components: readonly VarianceComponents[],
  canaries: number,
  schedule: readonly Pick<Look, 'seeds' | 'alpha'>[],
  margin: number,
): SequentialPower | null {
  const first = components[0];
  if (!first || schedule.length === 0 || !(first.runs >= 2)) return null;
  const looks = schedule.map((l, k): SequentialLookPower => {
    const v = scaledVariance(rescaleComponents(components, l.seeds, canaries), 1, 1);
    return {
      look: k + 1,
      seeds: l.seeds,
      alpha: l.alpha,
      probability: decisionProbability(effect, Math.sqrt(v.variance), v.df, margin, l.alpha),
    };
  });
  let undecided = 1;
  let seeds = 0;
  let before = 0;
  for (const l of looks) {
    // The seeds from the previous look to this one are run only while the comparison is open.
    seeds += (l.seeds - before) * undecided;
    before = l.seeds;
    undecided *= 1 - l.probability;
  }
  return {
    probability: 1 - undecided,
    at_least: Math.max(...looks.map((l) => l.probability)),
    expected_seeds: seeds,
    looks,
  };
}

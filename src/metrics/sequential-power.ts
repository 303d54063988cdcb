import type { VarianceComponents } from './bootstrap.js';
import type { Look } from './sequential.js';
import { decisionProbability, rescaleComponents, scaledVariance, tCdf } from './verdict.js';
import { normalQuantile } from './wilson.js';
import { studentTQuantile } from './distributions.js';
import { Rng } from '../random.js';

/**
 * Power of sequential replicates (`replicates: {until: decided, min, max}`) for one comparison. At
 * look k (n_k seeds per cell, its own level α_k from the spending schedule) the comparison's
 * components are rescaled to n_k seeds, as the fixed plan rescales them: an estimate spread as
 * effect + se_k · t(df_k), decided when outside the region where neither test rejects
 * (`decisionProbability` at α_k gives each look's chance by itself, p_k).
 *
 * The looks are one audit read as it grows: look k's runs are a prefix of look k + 1's, and the
 * canaries are the same at every look. For estimates that are means over nested sets of runs, the
 * covariance of two looks is the variance of the later one (Cov(est_j, est_k) = v_k for j < k:
 * the canary term is shared, the run terms of the later look average over the earlier ones), so
 * the looks' estimates form a Markov chain with correlation √(v_{k+1} / v_k) between neighbours.
 * The model: each look's estimate has its t(df_k) marginal, joined to the others by a Gaussian
 * copula with those correlations; P(decided by max) and the expected seeds come from `PATHS`
 * seeded paths of that chain (fixed seed: the same answer on every run; Monte Carlo error about
 * ±0.4 points). Approximations: medians treated as the means the covariance argument needs, the
 * df fixed per look (the audit's se is itself estimated), and no Holm across the comparisons still
 * open at a look (as in the fixed plan). Two bounds come with it: `at_least` = max_k p_k (the
 * chance of a union is at least each part's, whatever the correlation), and `independent` = 1 −
 * Π_k (1 − p_k), the looks as independent tests, which overstates when they are positively
 * correlated. bench/sequential.ts compares all three with simulation (docs/metrics.md).
 */
export const PATHS = 20_000;
const SEED = 0x5e9;

export interface SequentialLookPower {
  look: number;
  seeds: number;
  alpha: number;
  /** Decision probability of this look read by itself at its own α. */
  probability: number;
}

export interface SequentialPower {
  /** P(decided by max): correlated looks (see the module comment). */
  probability: number;
  /** P(decided by max) is at least this: the best single look's probability. */
  at_least: number;
  /** The looks as independent tests: 1 − Π(1 − p_k); an overstatement for correlated looks. */
  independent: number;
  /** Expected seeds per cell when the comparison stops (decided, or max), correlated looks. */
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
  const read = schedule.map((l, k) => {
    const v = scaledVariance(rescaleComponents(components, l.seeds, canaries), 1, 1);
    const se = Math.sqrt(v.variance);
    return {
      look: k + 1,
      seeds: l.seeds,
      alpha: l.alpha,
      se,
      probability: decisionProbability(effect, se, v.df, margin, l.alpha),
      open: openRegion(effect, se, v.df, margin, l.alpha),
    };
  });
  const looks = read.map(({ look, seeds, alpha, probability }) => ({ look, seeds, alpha, probability }));
  let undecided = 1;
  for (const l of looks) undecided *= 1 - l.probability;

  // Paths of the copula's chain: z_1 ~ N(0, 1), z_{k+1} = ρ_k z_k + √(1 − ρ_k²) ε.
  const rng = Rng.fromSeed(SEED);
  const normal = (): number => Math.sqrt(-2 * Math.log(1 - rng.float())) * Math.cos(2 * Math.PI * rng.float());
  let decided = 0;
  let seeds = 0;
  for (let p = 0; p < PATHS; p += 1) {
    let z = normal();
    let stoppedAt = read.length - 1;
    for (let k = 0; k < read.length; k += 1) {
      const r = read[k] as (typeof read)[number];
      if (k > 0) {
        const previous = (read[k - 1] as (typeof read)[number]).se;
        const rho = previous > 0 ? Math.min(1, r.se / previous) : 1;
        z = rho * z + Math.sqrt(1 - rho * rho) * normal();
      }
      if (!r.open.some(([lo, hi]) => z > lo && z < hi)) {
        decided += 1;
        stoppedAt = k;
        break;
      }
    }
    seeds += (read[stoppedAt] as (typeof read)[number]).seeds;
  }
  return {
    probability: decided / PATHS,
    at_least: Math.max(...looks.map((l) => l.probability)),
    independent: 1 - undecided,
    expected_seeds: seeds / PATHS,
    looks,
  };
}

/**
 * Where neither test rejects at a look, on the copula's normal scale: the estimate between
 * max(0, margin − t_{1−α} se) and t_{1−α/2} se in absolute value (as `decisionProbability` reads
 * it), each end mapped through the t(df) law of the estimate to a standard normal quantile.
 */
function openRegion(effect: number, se: number, df: number, margin: number, alpha: number): [number, number][] {
  if (!(se > 0)) return [];
  const q2 = studentTQuantile(1 - alpha / 2, Number.isFinite(df) ? df : Infinity);
  const q1 = studentTQuantile(1 - alpha, Number.isFinite(df) ? df : Infinity);
  const a = Math.max(0, margin - q1 * se);
  const b = q2 * se;
  if (a >= b) return [];
  const z = (x: number): number => {
    const u = tCdf((x - effect) / se, df);
    return u <= 0 ? -Infinity : u >= 1 ? Infinity : normalQuantile(u);
  };
  return [
    [z(-b), z(-a)],
    [z(a), z(b)],
  ];
}

/**
 * The GDP and f-DP one-run ε bounds on jax_privacy's own test inputs, printed beside the values
 * its tests expect (google-deepmind/jax_privacy `tests/auditing_test.py`): `_deterministic_normal`
 * members N(shift, 1) against non-members N(0, 1), the quantiles (i + ½)/n, no sampling noise.
 *
 *   npx tsx bench/privacy-bounds.ts
 *
 * - f-DP one run (`test_epsilon_one_run_close`): n = 10,000 each, significance 0.05, δ = 1e-6;
 * - binomial one run (same test, non-fdp cases): jax_privacy's guessing rule (scores ≥ a hull
 *   threshold, Bonferroni over T) on the existing `oneRunPValue` / `oneRunEpsilon`;
 * - GDP (`test_epsilon_from_gdp_tight`, there 500,000 random normals, rtol 0.05): here 500,000
 *   deterministic normals, significance 0.1, δ = 0.05, against the true ε of μ-GDP at δ.
 */
import { jaxOneRunSearch } from '../test/fixtures/one-run-search.js';
import { gdpEpsilonAt, normalPpf } from '../src/metrics/gaussian.js';
import { fdpOneRunBound } from '../src/metrics/privacy-fdp.js';
import { gdpEpsilon, rocHull } from '../src/metrics/privacy-gdp.js';
import type { ScoredCanary } from '../src/metrics/privacy.js';

const det = (mu: number, n: number): number[] => Array.from({ length: n }, (_, i) => normalPpf((i + 0.5) / n) + mu);
const pool = (ins: number[], outs: number[]): ScoredCanary[] => [
  ...ins.map((score) => ({ score, member: true })),
  ...outs.map((score) => ({ score, member: false })),
];

const expected: Record<number, number> = { 0: 0, 1: 2.164749, 2: 4.7218075, 4: 9.133752 };
console.log('f-DP one run: shift, ε here, ε jax_privacy, relative difference, hull thresholds');
for (const shift of [0, 1, 2, 4]) {
  const b = fdpOneRunBound(pool(det(shift, 10_000), det(0, 10_000)), 1e-6, 0.95);
  const e = expected[shift] as number;
  console.log(
    shift,
    b?.epsilon.toFixed(7),
    e,
    e === 0 ? '-' : ((b?.epsilon as number) / e - 1).toExponential(1),
    b?.thresholds,
  );
}
const expectedBinomial: Record<number, number> = { 1: 1.13346, 2: 2.311945, 4: 4.395568 };
console.log('binomial one run: shift, ε here, ε jax_privacy, relative difference');
for (const shift of [1, 2, 4]) {
  const h = rocHull(pool(det(shift, 10_000), det(0, 10_000))) as NonNullable<ReturnType<typeof rocHull>>;
  const best = jaxOneRunSearch(h);
  const e = expectedBinomial[shift] as number;
  console.log(shift, best.toFixed(7), e, (best / e - 1).toExponential(1));
}
console.log('GDP: mu, n_out/n_in, ε here, true ε, relative difference, hull thresholds');
for (const mu of [0.3, 1, 3]) {
  for (const ratio of [0.5, 1, 1.5]) {
    const b = gdpEpsilon(pool(det(mu, 500_000), det(0, 500_000 * ratio)), 5e-2, 0.9);
    const truth = gdpEpsilonAt(mu, 5e-2);
    console.log(
      mu,
      ratio,
      b?.epsilon.toFixed(4),
      truth.toFixed(4),
      ((b?.epsilon as number) / truth - 1).toFixed(4),
      b?.thresholds,
    );
  }
}

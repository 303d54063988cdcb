// tier: full
import { jaxOneRunSearch } from '../fixtures/one-run-search.js';
import { describe, expect, it } from 'vitest';
import { normalPpf } from '../../src/metrics/gaussian.js';
import type { ScoredCanary } from '../../src/metrics/privacy.js';
import { rocHull } from '../../src/metrics/privacy-gdp.js';

/**
 * The known answer of google-deepmind/jax_privacy `tests/auditing_test.py`,
 * `test_epsilon_one_run_close` ('two': shift 2, ε = 2.311945) that costs several seconds of CPU:
 * the fast tier's privacy-bounds.test.ts runs its other cases with the same procedure.
 */
const deterministicNormal = (mu: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => normalPpf((i + 0.5) / n) + mu);

describe('binomial one-run ε core (jax_privacy test_epsilon_one_run_close, case two)', () => {
  it('shift 2 gives ε = 2.311945 (rtol 1e-5)', () => {
    const pool: ScoredCanary[] = [
      ...deterministicNormal(2, 10_000).map((score) => ({ score, member: true })),
      ...deterministicNormal(0, 10_000).map((score) => ({ score, member: false })),
    ];
    const h = rocHull(pool) as NonNullable<ReturnType<typeof rocHull>>;
    const best = jaxOneRunSearch(h);
    expect(Math.abs(best / 2.311945 - 1)).toBeLessThan(1e-5);
  });
});

// tier: full
import { describe, expect, it } from 'vitest';
import { normalPpf } from '../../src/metrics/gaussian.js';
import { oneRunEpsilon, oneRunPValue, type ScoredCanary } from '../../src/metrics/privacy.js';
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
    const level = 0.05 / h.thresholds.length;
    const cands = h.thresholds
      .map((_, i) => ({
        correct: h.nIn - (h.fn[i] as number),
        guesses: h.nIn - (h.fn[i] as number) + h.nOut - (h.tn[i] as number),
      }))
      .filter((x) => x.guesses > 0)
      .sort((a, b) => b.correct * a.guesses - a.correct * b.guesses);
    let best = 0;
    for (const x of cands) {
      if (
        x.correct / x.guesses <= 1 / (1 + Math.exp(-best)) ||
        oneRunPValue(20_000, x.guesses, x.correct, best, 1e-6) >= level
      )
        continue;
      best = Math.max(best, oneRunEpsilon(20_000, x.guesses, x.correct, 1e-6, level));
    }
    expect(Math.abs(best / 2.311945 - 1)).toBeLessThan(1e-5);
  });
});

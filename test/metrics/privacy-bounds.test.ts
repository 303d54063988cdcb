import { describe, expect, it } from 'vitest';
import { jaxOneRunSearch } from '../fixtures/one-run-search.js';
import { Rng } from '../../src/random.js';
import {
  erfc,
  gdpEpsilonAt,
  gdpLogDelta,
  gdpMuFor,
  normalCdf,
  normalLogCdf,
  normalPpf,
} from '../../src/metrics/gaussian.js';
import { clopperPearsonEpsilon, membershipAuc, oneRunBound, type ScoredCanary } from '../../src/metrics/privacy.js';
import { gdpEpsilon, hullAuc, rocHull } from '../../src/metrics/privacy-gdp.js';
import { fdpOneRunBound, strategyLabel, thresholdStrategy } from '../../src/metrics/privacy-fdp.js';

/**
 * Known answers for the GDP and f-DP ε bounds and the hull AUROC, reproduced from
 * google-deepmind/jax_privacy `tests/auditing_test.py` (the functions named in each test), and
 * null-score tests: ε = 0 on pools that carry no membership signal, in any input order.
 */

const pool = (ins: readonly number[], outs: readonly number[]): ScoredCanary[] => [
  ...ins.map((score) => ({ score, member: true })),
  ...outs.map((score) => ({ score, member: false })),
];

/** jax_privacy's `_deterministic_normal`: the (i + ½)/n quantiles of N(mu, sigma²). */
const deterministicNormal = (mu: number, sigma: number, n: number): number[] =>
  Array.from({ length: n }, (_, i) => normalPpf((i + 0.5) / n) * sigma + mu);

/** N(mu, 1) draws by Box–Muller from a seeded stream. */
function normals(rng: Rng, mu: number, n: number): number[] {
  return Array.from(
    { length: n },
    () => mu + Math.sqrt(-2 * Math.log(1 - rng.float())) * Math.cos(2 * Math.PI * rng.float()),
  );
}

describe('standard normal and Gaussian-DP conversions', () => {
  it('matches tabulated values of Φ, erfc and Φ⁻¹', () => {
    expect(normalCdf(1)).toBeCloseTo(0.8413447460685429, 14);
    expect(normalCdf(-1.96) / 0.024997895148220435).toBeCloseTo(1, 12);
    expect(normalCdf(-10) / 7.619853024160527e-24).toBeCloseTo(1, 12);
    expect(erfc(3) / 2.209049699858544e-5).toBeCloseTo(1, 12);
    // ln Φ(−40) = −804.608442013754 (Φ(−40) underflows a double).
    expect(normalLogCdf(-40)).toBeCloseTo(-804.6084420137538, 9);
    expect(normalPpf(0.975)).toBeCloseTo(1.959963984540054, 13);
    expect(normalPpf(1e-10)).toBeCloseTo(-6.361340902404056, 12);
  });

  it('converts μ-GDP to (ε, δ) and back', () => {
    // δ_μ(0) = Φ(μ/2) − Φ(−μ/2) in closed form.
    for (const mu of [0.3, 1, 3])
      expect(Math.exp(gdpLogDelta(mu, 0))).toBeCloseTo(normalCdf(mu / 2) - normalCdf(-mu / 2), 12);
    for (const mu of [0.2, 1, 4]) expect(gdpMuFor(gdpEpsilonAt(mu, 1e-5), 1e-5)).toBeCloseTo(mu, 8);
    // Balle & Wang (2018): the analytic Gaussian mechanism for ε = 1, δ = 1e-5 needs σ ≈ 3.73.
    expect(1 / gdpMuFor(1, 1e-5)).toBeCloseTo(3.73, 2);
    expect(gdpEpsilonAt(0.1, 5e-2)).toBe(0);
  });
});

describe('ROC hull (jax_privacy tests/auditing_test.py, test_get_tn_fn_counts*)', () => {
  it('keeps the hull thresholds of test_get_tn_fn_counts', () => {
    expect(rocHull(pool([1.5, 2.5, 0.5, 3.5], [0, 3, 2, 1]))).toMatchObject({
      thresholds: [0, 0.5, 3.5, Infinity],
      tn: [0, 1, 4, 4],
      fn: [0, 0, 3, 4],
    });
  });
  it('handles ties (convex and non-convex) and an all-zero pool', () => {
    expect(rocHull(pool([0, 1, 1, 2], [0, 0, 1, 1]))).toMatchObject({
      thresholds: [0, 1, 2, Infinity],
      tn: [0, 2, 4, 4],
      fn: [0, 1, 3, 4],
    });
    expect(rocHull(pool([0, 0, 1, 2], [0, 1, 1, 1]))).toMatchObject({
      thresholds: [0, 2, Infinity],
      tn: [0, 4, 4],
      fn: [0, 3, 4],
    });
    expect(rocHull(pool([0, 0, 0, 0], [0, 0, 0, 0]))).toMatchObject({
      thresholds: [0, Infinity],
      tn: [0, 4],
      fn: [0, 4],
    });
    expect(rocHull(pool([1], []))).toBeNull();
  });
});

describe('hull AUROC (jax_privacy test_attack_auroc_*)', () => {
  it('gives 13/16 on the simple pool, ½ and 1 on the worst and best, π/4 on the circular ROC', () => {
    expect(hullAuc(pool([0, 4, 6, 7], [1, 2, 3, 5]))).toBeCloseTo(13 / 16, 12);
    for (const ratio of [0.5, 1, 1.5]) {
      const nOut = Math.floor(30 * ratio);
      expect(hullAuc(pool(Array(30).fill(0), Array(nOut).fill(1)))).toBeCloseTo(0.5, 12);
      expect(hullAuc(pool(Array(30).fill(1), Array(nOut).fill(0)))).toBeCloseTo(1, 12);
    }
    // _scores_with_circular_roc: out = linspace(0, 1, n_out), in = sqrt(1 − linspace(0, 1, n_in)²).
    const lin = (n: number): number[] => Array.from({ length: n }, (_, i) => i / (n - 1));
    expect(
      hullAuc(
        pool(
          lin(10_000).map((x) => Math.sqrt(1 - x * x)),
          lin(15_000),
        ),
      ),
    ).toBeCloseTo(Math.PI / 4, 3);
  });
});

describe('f-DP one-run ε (jax_privacy test_epsilon_one_run_close, *_fdp cases)', () => {
  // n = 10,000 each, out ~ deterministic N(0, 1), in ~ deterministic N(shift, 1), significance 0.05, δ = 1e-6.
  it.each([
    [0, 0],
    [1, 2.164749],
    [2, 4.7218075],
    [4, 9.133752],
  ])('shift %d gives ε = %f (rtol 1e-5)', (shift, expected) => {
    const b = fdpOneRunBound(
      pool(deterministicNormal(shift, 1, 10_000), deterministicNormal(0, 1, 10_000)),
      1e-6,
      0.95,
    );
    expect(b?.threshold_strategy).toBe('bonferroni');
    if (expected === 0) expect(b?.epsilon).toBe(0);
    else expect(Math.abs((b?.epsilon as number) / expected - 1)).toBeLessThan(1e-5);
  });
});

describe('binomial one-run ε core (jax_privacy test_epsilon_one_run_close, non-fdp cases)', () => {
  // The report's one-run bound guesses the r/2 highest "in" and r/2 lowest "out"; jax_privacy guesses
  // "in" for scores ≥ a hull threshold (Bonferroni over T). With jax_privacy's rule, the existing
  // p-value (`oneRunPValue`) and root (`oneRunEpsilon`) must give its expected values.
  // Shift 2 (2.311945) costs several seconds: test/metrics/privacy-bounds-full.test.ts (full tier).
  it.each([
    [0, 0],
    [1, 1.13346],
    [4, 4.395568],
  ])('shift %d gives ε = %f (rtol 1e-5)', (shift, expected) => {
    const h = rocHull(pool(deterministicNormal(shift, 1, 10_000), deterministicNormal(0, 1, 10_000))) as NonNullable<
      ReturnType<typeof rocHull>
    >;
    const best = jaxOneRunSearch(h);
    if (expected === 0) expect(best).toBe(0);
    else expect(Math.abs(best / expected - 1)).toBeLessThan(1e-5);
  });
});

describe('GDP ε (jax_privacy test_epsilon_from_gdp_*)', () => {
  it('is a lower bound within 5% of the true ε at μ = 1 on 500,000 deterministic-normal members (test_epsilon_from_gdp_tight)', () => {
    // jax_privacy draws 500,000 random normals; the quantiles here carry no sampling noise, so the
    // bound sits a little further below: within 5% at μ = 1 and 3 (μ = 0.3 is 10% below: not asserted;
    // every case is printed by bench/privacy-bounds.ts). One case here: a million canaries cost seconds.
    for (const [mu, ratio] of [[1, 0.5]] as const) {
      const b = gdpEpsilon(
        pool(deterministicNormal(mu, 1, 500_000), deterministicNormal(0, 1, 500_000 * ratio)),
        5e-2,
        0.9,
      );
      const truth = gdpEpsilonAt(mu, 5e-2);
      expect(b?.epsilon).toBeLessThan(truth);
      expect(b?.epsilon).toBeGreaterThan(0.95 * truth);
    }
  });

  it.each([0, -1, -3])(
    'is exactly 0 when members are N(%d, 1) against N(0, 1) (test_epsilon_from_gdp_non_positive_mu_is_zero, PR #270)',
    (mu) => {
      const rng = new Rng('gdp-null', mu);
      const b = gdpEpsilon(pool(normals(rng, mu, 5000), normals(rng, 0, 5000)), 1e-5, 0.95);
      expect(b?.epsilon).toBe(0);
      expect(b?.threshold_strategy).toBe('bonferroni');
    },
  );
});

describe('null scores: every bound is 0, in either input order', () => {
  const tied = pool(Array(500).fill(3.25), Array(500).fill(3.25));
  // Members and non-members with the very same score multiset.
  const same = (() => {
    const scores = normals(new Rng('same-multiset'), 0, 400);
    return pool(scores, scores);
  })();
  for (const [name, p] of [
    ['all tied', tied],
    ['same distribution', same],
  ] as const) {
    it(`${name}`, () => {
      for (const order of [p, [...p].reverse(), new Rng('order', name).shuffle([...p])]) {
        expect(gdpEpsilon(order, 1e-5)?.epsilon).toBe(0);
        expect(fdpOneRunBound(order, 1e-5)?.epsilon).toBe(0);
        expect(fdpOneRunBound(order, 1e-5, 0.95, thresholdStrategy('split', 1))?.epsilon).toBe(0);
        expect(
          fdpOneRunBound(order, 1e-5, 0.95, { kind: 'multisplit', fraction: 0.5, seed: 1, samples: 9 })?.epsilon,
        ).toBe(0);
        expect(clopperPearsonEpsilon(order, 1e-5)?.epsilon).toBe(0);
        expect(oneRunBound(order, 1e-5)?.epsilon).toBe(0);
        expect(hullAuc(order)).toBeCloseTo(0.5, 12);
        expect(membershipAuc(order)?.estimate).toBe(0.5);
      }
    });
  }
});

describe('threshold strategies (jax_privacy Split / MultiSplit)', () => {
  const signal = pool(deterministicNormal(2, 1, 2000), deterministicNormal(0, 1, 2000));
  it('record the strategy and give the same bound for the same seed in any input order', () => {
    const split = fdpOneRunBound(signal, 1e-6, 0.95, thresholdStrategy('split', 7));
    expect(split?.threshold_strategy).toBe('split(0.5, seed 7)');
    expect(split?.epsilon).toBeGreaterThan(0);
    expect(fdpOneRunBound([...signal].reverse(), 1e-6, 0.95, thresholdStrategy('split', 7))?.epsilon).toBe(
      split?.epsilon,
    );
    const multi = fdpOneRunBound(signal, 1e-6, 0.95, { kind: 'multisplit', fraction: 0.5, seed: 7, samples: 11 });
    expect(multi?.threshold_strategy).toBe('multisplit(11 × 0.5, seed 7)');
    expect(multi?.epsilon).toBeGreaterThan(0);
    expect(strategyLabel(thresholdStrategy('multisplit'))).toBe('multisplit(100 × 0.5, seed 0)');
  });
  it('rejects bad settings with the field and its range', () => {
    expect(() => fdpOneRunBound(signal, 0)).toThrow(/delta must be in \(0, 1\]/);
    expect(() => fdpOneRunBound(signal, 1e-6, 0.95, { kind: 'split', fraction: 1, seed: 0 })).toThrow(
      /fraction must be in \(0, 1\)/,
    );
    expect(() => thresholdStrategy('holm' as never)).toThrow(/one of: bonferroni, split, multisplit/);
  });
});

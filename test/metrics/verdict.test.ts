import { describe, expect, it } from 'vitest';
import {
  decisionProbability,
  holmAdjust,
  powerAdvice,
  readVerdict,
  scaledVariance,
  spreadOf,
  testSpread,
} from '../../src/metrics/verdict.js';
import type { VarianceComponents } from '../../src/metrics/bootstrap.js';

describe('testSpread', () => {
  it('gives the normal two-sided and TOST p-values (known answers)', () => {
    const t = testSpread({ estimate: 2, se: 1, df: Infinity }, 1);
    expect(t.p_difference).toBeCloseTo(0.0455003, 6); // 2(1 − Φ(2))
    expect(t.p_equivalence).toBeCloseTo(0.8413447, 6); // Φ(1): the +margin side
    expect(readVerdict(t, t.p_difference <= 0.05, t.p_equivalence <= 0.05)).toEqual({
      verdict: 'higher',
      within_margin: false,
    });
    const e = testSpread({ estimate: 0, se: 0.3, df: Infinity }, 1);
    expect(e.p_difference).toBe(1);
    expect(e.p_equivalence).toBeCloseTo(0.00042906, 8); // Φ(−1/0.3)
    expect(readVerdict(e, false, e.p_equivalence <= 0.05).verdict).toBe('equivalent');
  });

  it("uses Student t with the interval's df: t(0.975, 2) = 4.302653 gives p = 0.05", () => {
    const t = testSpread({ estimate: -4.302653, se: 1, df: 2 }, 1);
    expect(t.p_difference).toBeCloseTo(0.05, 6);
    expect(readVerdict(t, t.p_difference <= 0.05 + 1e-9, false).verdict).toBe('lower');
  });

  it('reads an undecided comparison, a small sure effect, and a zero-spread estimate', () => {
    const u = testSpread({ estimate: 0.5, se: 2, df: 10 }, 1);
    expect(readVerdict(u, u.p_difference <= 0.05, u.p_equivalence <= 0.05)).toEqual({
      verdict: 'undecided',
      within_margin: false,
    });
    const small = testSpread({ estimate: 0.5, se: 0.1, df: Infinity }, 1);
    expect(readVerdict(small, small.p_difference <= 0.05, small.p_equivalence <= 0.05)).toEqual({
      verdict: 'higher',
      within_margin: true,
    });
    expect(testSpread({ estimate: 3, se: 0, df: 2 }, 1)).toMatchObject({ p_difference: 0, p_equivalence: 1 });
    expect(testSpread({ estimate: 0, se: 0, df: 2 }, 1)).toMatchObject({ p_difference: 1, p_equivalence: 0 });
    expect(() => testSpread({ estimate: 0, se: 1, df: 2 }, 0)).toThrow(RangeError);
  });

  it('reads a percentile interval as a normal one', () => {
    const s = spreadOf({ estimate: 1, lo: -0.96, hi: 2.96, se: null, df: null }, 0.05);
    expect(s.se).toBeCloseTo(3.92 / (2 * 1.959964), 6);
    expect(s.df).toBe(Infinity);
    expect(spreadOf({ estimate: 1, lo: 0, hi: 2, se: 0.4, df: 3 }, 0.05)).toEqual({ estimate: 1, se: 0.4, df: 3 });
  });
});

describe('holmAdjust', () => {
  it('is Bonferroni-then-step-down over comparisons with an open test (known answers)', () => {
    // Equivalence never rejects: every comparison keeps an open test, so the divisor stays m.
    const adj = holmAdjust([0.01, 0.04, 0.03, 0.005].map((p) => ({ p_difference: p, p_equivalence: 1 })));
    expect(adj.map((a) => a.p_difference)).toEqual([0.04, 0.16, 0.12, 0.02].map((x) => expect.closeTo(x, 12)));
    expect(adj.every((a) => a.p_equivalence === 1)).toBe(true);
  });

  it("drops a comparison from the count once both its tests reject (Holm's m − j + 1)", () => {
    const adj = holmAdjust([
      { p_difference: 0.001, p_equivalence: 0.002 },
      { p_difference: 0.02, p_equivalence: 0.9 },
    ]);
    expect(adj[0]?.p_difference).toBeCloseTo(0.002, 12);
    expect(adj[0]?.p_equivalence).toBeCloseTo(0.004, 12);
    expect(adj[1]?.p_difference).toBeCloseTo(0.02, 12); // ×1: one comparison left open
    expect(adj[1]?.p_equivalence).toBeCloseTo(0.9, 12);
  });
});

describe('power', () => {
  const crossed: VarianceComponents = { design: 'crossed', run: 1, canary: 0.25, residual: 0.1, runs: 3, canaries: 16 };

  it('scales each component by its own factor', () => {
    expect(scaledVariance([crossed], 1, 1).variance).toBeCloseTo(1.35, 12);
    expect(scaledVariance([crossed], 2, 1).variance).toBeCloseTo(0.5 + 0.25 + 0.05, 12);
    expect(scaledVariance([crossed], 1, 4).variance).toBeCloseTo(1 + 0.0625 + 0.025, 12);
    // Two sides add.
    expect(scaledVariance([crossed, crossed], 1, 1).variance).toBeCloseTo(2.7, 12);
    // Run-dominated: df near runs − 1.
    expect(scaledVariance([{ ...crossed, canary: 0, residual: 0 }], 1, 1).df).toBeCloseTo(2, 12);
    // Canary-dominated: Satterthwaite's df would be 15 (the canary term's), capped at 2(R − 1) = 4
    // as the report's interval is (medianDf); at 8 runs the cap is 14.
    expect(scaledVariance([{ ...crossed, run: 0, residual: 0 }], 1, 1).df).toBe(4);
    expect(scaledVariance([{ ...crossed, run: 0, residual: 0 }], 8 / 3, 1).df).toBeCloseTo(14, 12);
  });

  it('gives the normal power of a two-sided test far from the margin', () => {
    // effect 2.8 se, normal: P(Z > 1.96 − 2.8) + P(Z < −1.96 − 2.8) = 0.7995 + ~0; equivalence cannot happen (margin tiny).
    expect(decisionProbability(2.8, 1, Infinity, 1e-9, 0.05)).toBeCloseTo(0.79955, 4);
    // At effect 0 the decision is equivalence: P(|est| < margin − 1.645 se).
    expect(decisionProbability(0, 0.1, Infinity, 1, 0.05)).toBeCloseTo(1, 12); // margin − q1·se > q2·se: always decided
    const p = decisionProbability(0, 0.4, Infinity, 1, 0.05);
    // neither rejects when |est| ∈ [1 − 1.645·0.4, 1.96·0.4] = [0.342, 0.784]: 2(Φ(1.96) − Φ(0.855)) = 0.3424
    expect(p).toBeCloseTo(1 - 2 * (0.975 - 0.80373), 3);
  });

  it('finds the runs that decide an effect with 80% probability, and says when canaries cannot', () => {
    const advice = powerAdvice(2, [crossed], 1, 0.05);
    expect(advice?.at).toEqual({ runs: 3, canaries: 16 });
    expect(advice?.probability).toBeLessThan(0.8);
    const runs = advice?.runs as number;
    const v = (n: number): number => {
      const s = scaledVariance([crossed], n / 3, 1);
      return decisionProbability(2, Math.sqrt(s.variance), s.df, 1, 0.05);
    };
    expect(v(runs)).toBeGreaterThanOrEqual(0.8);
    expect(v(runs - 1)).toBeLessThan(0.8);
    // The run term alone keeps the variance at 1/3 at least: canaries alone never decide.
    expect(advice?.canaries).toBeNull();
    expect(powerAdvice(2, [], 1, 0.05)).toBeNull();
  });
});

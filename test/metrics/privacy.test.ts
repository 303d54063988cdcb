import { describe, expect, it } from 'vitest';
import { betaQuantile, clopperPearson, studentTQuantile } from '../../src/metrics/distributions.js';
import {
  clopperPearsonEpsilon,
  membershipAuc,
  oneRunBound,
  oneRunEpsilon,
  oneRunGuesses,
  oneRunPValue,
  tprAtFpr,
  type ScoredCanary,
} from '../../src/metrics/privacy.js';

describe('distribution functions (published tables)', () => {
  it('gives Student t quantiles', () => {
    // Two-sided 95% critical values: 12.706 (1 df), 4.303 (2), 2.228 (10), 1.960 (∞).
    expect(studentTQuantile(0.975, 1)).toBeCloseTo(12.7062047, 5);
    expect(studentTQuantile(0.975, 2)).toBeCloseTo(4.3026527, 6);
    expect(studentTQuantile(0.975, 10)).toBeCloseTo(2.2281389, 6);
    expect(studentTQuantile(0.975, Infinity)).toBeCloseTo(1.959964, 5);
    expect(studentTQuantile(0.025, 2)).toBeCloseTo(-4.3026527, 6);
  });

  it('gives exact Clopper–Pearson intervals', () => {
    // k = 0 and k = n have closed forms: 1 − (α/2)^(1/n) and (α/2)^(1/n).
    expect(clopperPearson(0, 10).hi).toBeCloseTo(1 - 0.025 ** 0.1, 10);
    expect(clopperPearson(10, 10).lo).toBeCloseTo(0.025 ** 0.1, 10);
    // 5/10: [0.1871, 0.8129] (the textbook exact interval).
    expect(clopperPearson(5, 10).lo).toBeCloseTo(0.187086, 5);
    expect(clopperPearson(5, 10).hi).toBeCloseTo(0.812914, 5);
    expect(betaQuantile(0.5, 2, 2)).toBeCloseTo(0.5, 10);
  });
});

describe('membership readouts', () => {
  it('computes the AUC with ties counted half', () => {
    // Members 3, 4 against 1, 2, 3: (1 + 1 + ½ + 1 + 1 + 1) / 6.
    const auc = membershipAuc(
      [3, 4].map((score) => ({ score, member: true })).concat([1, 2, 3].map((score) => ({ score, member: false }))),
    );
    expect(auc?.estimate).toBeCloseTo(5.5 / 6, 12);
    expect(auc?.lo).toBeLessThan(auc?.estimate as number);
    expect(membershipAuc([{ score: 1, member: true }])).toBeNull();
  });

  it('reads the TPR at a low FPR off the held-out scores', () => {
    const others = Array.from({ length: 100 }, (_, i) => ({ score: i, member: false }));
    const members = Array.from({ length: 10 }, (_, i) => ({ score: 95 + i, member: true }));
    // 1% of 100 held-out: one may pass, so the bar is the second-highest held-out score (98).
    const t = tprAtFpr([...others, ...members], 0.01);
    expect(t).toMatchObject({ k: 6, n: 10, tpr: 0.6, achieved_fpr: 0.01, resolution: 0.01 });
    // 0.1% of 100: none may pass.
    expect(tprAtFpr([...others, ...members], 0.001)).toMatchObject({ k: 5, achieved_fpr: 0 });
  });

  it('bounds ε by Clopper–Pearson over every threshold (worked by hand)', () => {
    // 50 members all above 50 non-members, δ = 0: the best threshold has TPR 50/50 and FPR 0/50;
    // with T = 100 thresholds each one-sided bound is at 0.05/200, so TPR ≥ (0.05/200)^(1/50),
    // FPR ≤ 1 − (0.05/200)^(1/50), and ε ≥ ln(TPR_lo / FPR_hi).
    const canaries = Array.from({ length: 100 }, (_, i) => ({ score: i, member: i >= 50 }));
    const lo = (0.05 / 200) ** (1 / 50);
    const bound = clopperPearsonEpsilon(canaries, 0);
    expect(bound?.thresholds).toBe(100);
    expect(bound?.epsilon).toBeCloseTo(Math.log(lo / (1 - lo)), 6);
    // No separation at all: nothing is excluded.
    expect(
      clopperPearsonEpsilon(
        Array.from({ length: 40 }, (_, i) => ({ score: i % 2, member: i < 20 })),
        1e-5,
      )?.epsilon,
    ).toBe(0);
  });
});

describe('one-run bound (Steinke, Nasr & Jagielski 2023, Appendix D)', () => {
  it('matches the δ = 0 closed form: r right out of r gives q^r = p', () => {
    // P[Binomial(10, q) ≥ 10] = q^10 = 0.05 → q = 0.05^(1/10), ε = ln(q / (1 − q)).
    const q = 0.05 ** 0.1;
    expect(oneRunEpsilon(10, 10, 10, 0, 0.05)).toBeCloseTo(Math.log(q / (1 - q)), 6);
    expect(oneRunPValue(10, 10, 10, Math.log(q / (1 - q)), 0)).toBeCloseTo(0.05, 10);
  });

  it('adds the δ term as the paper does (worked by hand for one canary)', () => {
    // m = r = v = 1, ε = 0: q = ½, β = P[Bin(1, ½) ≥ 1] = ½; α = max_i P[v > Bin ≥ v − i]/i = ½;
    // p = β + α·δ·2m = ½ + ½·0.1·2 = 0.6.
    expect(oneRunPValue(1, 1, 1, 0, 0.1)).toBeCloseTo(0.6, 12);
    // A larger δ can only weaken the bound.
    expect(oneRunEpsilon(100, 100, 90, 1e-3, 0.05)).toBeLessThan(oneRunEpsilon(100, 100, 90, 0, 0.05));
  });

  it('guesses the top scores in and the bottom ones out, Bonferroni over its choices of r', () => {
    const canaries = Array.from({ length: 64 }, (_, i) => ({ score: i, member: i >= 32 }));
    const b = oneRunBound(canaries, 0);
    expect(b?.m).toBe(64);
    expect(b?.correct).toBe(b?.guesses);
    // Perfect guesses on r canaries at level 0.05/4: ε = ln(q/(1−q)) with q^r = 0.0125.
    const r = b?.guesses as number;
    const q = 0.0125 ** (1 / r);
    expect(b?.epsilon).toBeCloseTo(Math.log(q / (1 - q)), 5);
    expect(r).toBe(64);
  });
});

describe('ties: input order decides nothing', () => {
  const CEILING = Math.log2(10000);
  const pool = (members: number[], others: number[]): ScoredCanary[] => [
    ...members.map((score) => ({ score, member: true })),
    ...others.map((score) => ({ score, member: false })),
  ];
  // A seeded shuffle (LCG) so a third order is tried besides members-first and reversed.
  const shuffled = <T>(xs: readonly T[], seed: number): T[] => {
    const out = [...xs];
    let s = seed;
    for (let i = out.length - 1; i > 0; i -= 1) {
      s = (s * 1103515245 + 12345) % 2147483648;
      const j = s % (i + 1);
      [out[i], out[j]] = [out[j] as T, out[i] as T];
    }
    return out;
  };
  const orders = (xs: ScoredCanary[]): ScoredCanary[][] => [xs, [...xs].reverse(), shuffled(xs, 7), shuffled(xs, 11)];

  it('gives ε = 0 on an all-tied pool (50 members, 50 non-members at 13.29) in every order', () => {
    const tied = pool(Array(50).fill(CEILING), Array(50).fill(CEILING));
    for (const xs of orders(tied)) {
      const one = oneRunBound(xs, 1e-5);
      // Members-first used to give 3.10: every tied member landed among the "in" guesses.
      expect(one).toMatchObject({ epsilon: 0, guesses: 0, correct: 0, m: 100 });
      expect(one?.abstained).toBeGreaterThan(0);
      expect(clopperPearsonEpsilon(xs, 1e-5)?.epsilon).toBe(0);
      expect(membershipAuc(xs)?.estimate).toBe(0.5);
      expect(tprAtFpr(xs, 0.01)).toMatchObject({ k: 0, tpr: 0, achieved_fpr: 0 });
    }
  });

  it('gives ε = 0 on flat runs (every exposure 0) in every order', () => {
    const flat = pool(Array(32).fill(0), Array(32).fill(0));
    for (const xs of orders(flat)) {
      expect(oneRunBound(xs, 1e-5)?.epsilon).toBe(0);
      expect(clopperPearsonEpsilon(xs, 1e-5)?.epsilon).toBe(0);
    }
  });

  it('gives the same bounds in every order on a pool tied at the ceiling', () => {
    // 30 of 50 members and 12 of 50 non-members ranked first (13.29 bits); the rest spread below.
    const members = [...Array(30).fill(CEILING), ...Array.from({ length: 20 }, (_, i) => 2 + i * 0.4)];
    const others = [...Array(12).fill(CEILING), ...Array.from({ length: 38 }, (_, i) => i * 0.2)];
    const xs = pool(members, others);
    const ref = oneRunBound(xs, 1e-5);
    // The ceiling block (42 canaries) straddles the cut at r/2 = 50 for r = 100 and r/2 = 25 for
    // r = 50: no guess is made inside it there.
    expect(ref?.epsilon).toBeGreaterThan(0);
    for (const order of orders(xs).slice(1)) {
      expect(oneRunBound(order, 1e-5)).toEqual(ref);
      expect(clopperPearsonEpsilon(order, 1e-5)).toEqual(clopperPearsonEpsilon(xs, 1e-5));
      expect(tprAtFpr(order, 0.01)).toEqual(tprAtFpr(xs, 0.01));
      expect(membershipAuc(order)).toEqual(membershipAuc(xs));
    }
  });

  it('abstains only on the tied block that straddles the cut (worked by hand)', () => {
    // Scores 9 8 7 7 | 7 2 1 0 (m = 8, r = 8): the block of 7s straddles the middle, so "in" is
    // {9, 8} and "out" is {2, 1, 0}; three canaries get no guess.
    const xs = [
      { score: 9, member: true },
      { score: 8, member: true },
      { score: 7, member: true },
      { score: 7, member: true },
      { score: 7, member: false },
      { score: 2, member: false },
      { score: 1, member: false },
      { score: 0, member: true },
    ];
    for (const order of orders(xs)) {
      const b = oneRunBound(order, 0, 0.95);
      // Choices r ∈ {2, 4, 8}: r = 8 guesses {9, 8} in and {2, 1, 0} out (4 of 5 right); r = 4
      // guesses {9, 8} in and {1, 0} out (3 of 4: 0 is a member); r = 2 guesses 9 in, 0 out (1 of 2).
      // Eight canaries at 0.05/3 cannot exclude ε = 0 whichever r is chosen.
      expect(b).toMatchObject({ m: 8, epsilon: 0, guesses: 2, correct: 1, abstained: 0 });
      expect(
        oneRunGuesses(
          [...order].sort((a, b) => b.score - a.score),
          8,
        ),
      ).toEqual({ guesses: 5, correct: 4, abstained: 3 });
      expect(
        oneRunGuesses(
          [...order].sort((a, b) => b.score - a.score),
          4,
        ),
      ).toEqual({ guesses: 4, correct: 3, abstained: 0 });
    }
    // The TPR threshold never splits a tied block in the members' favour: with the bar at 7 the
    // tied members stay out whatever the order.
    const bar = [...xs, { score: 7, member: false }];
    for (const order of orders(bar)) expect(tprAtFpr(order, 0.34)?.k).toBe(2);
  });
});

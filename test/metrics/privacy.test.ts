import { describe, expect, it } from 'vitest';
import { betaQuantile, clopperPearson, studentTQuantile } from '../../src/metrics/distributions.js';
import { clopperPearsonEpsilon, membershipAuc, oneRunBound, oneRunEpsilon, oneRunPValue, tprAtFpr } from '../../src/metrics/privacy.js';

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
    const auc = membershipAuc([3, 4].map((score) => ({ score, member: true })).concat([1, 2, 3].map((score) => ({ score, member: false }))));
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
    expect(clopperPearsonEpsilon(Array.from({ length: 40 }, (_, i) => ({ score: i % 2, member: i < 20 })), 1e-5)?.epsilon).toBe(0);
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

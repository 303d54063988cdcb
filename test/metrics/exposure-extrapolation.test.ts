import { describe, expect, it } from 'vitest';
import {
  extrapolatedExposure,
  fitSkewNormal,
  ksDistance,
  skewNormalCdf,
  skewNormalLogLikelihood,
  skewNormalLogSf,
  skewNormalMoments,
} from '../../src/metrics/exposure-extrapolation.js';
import { normalCdf, normalLogCdf, normalLogCdfFast } from '../../src/metrics/gaussian.js';
import { Rng } from '../../src/random.js';

const std = (shape: number) => ({ location: 0, scale: 1, shape });

/** Skew-normal draws by the convolution form X = δ|U0| + √(1−δ²) U1 (Azzalini 1985). */
function skewNormalSample(n: number, location: number, scale: number, shape: number, seed: number): number[] {
  const rng = Rng.fromSeed(seed);
  const gauss = (): number => Math.sqrt(-2 * Math.log(1 - rng.float())) * Math.cos(2 * Math.PI * rng.float());
  const delta = shape / Math.sqrt(1 + shape * shape);
  return Array.from(
    { length: n },
    () => location + scale * (delta * Math.abs(gauss()) + Math.sqrt(1 - delta * delta) * gauss()),
  );
}

describe('skew-normal tail', () => {
  it('is the normal tail at shape 0', () => {
    for (const z of [-4, -1, 0, 1.5, 6, 30]) expect(skewNormalLogSf(z, std(0))).toBeCloseTo(normalLogCdf(-z), 6);
  });

  it('matches the closed forms at shape ±1: F = Φ(z)² and 1 − F = Φ(−z)²', () => {
    // Owen's T(h, 1) = Φ(h)(1 − Φ(h))/2, so F(z; 1) = Φ(z) − 2T = Φ(z)²; mirrored for shape −1.
    for (const z of [-3, -0.5, 0, 0.7, 2.5, 5]) expect(skewNormalCdf(z, std(1))).toBeCloseTo(normalCdf(z) ** 2, 7);
    // Deep into the tail, in logs: 2 log Φ(−z) down to e^-400.
    for (const z of [1, 4, 8, 12, 20]) {
      const want = 2 * normalLogCdf(-z);
      expect(Math.abs(skewNormalLogSf(z, std(-1)) / want - 1)).toBeLessThan(1e-6);
    }
  });

  it('scales with location and scale', () => {
    const d = { location: -7, scale: 0.5, shape: 3 };
    expect(skewNormalLogSf(-7 + 0.5 * 2.2, d)).toBeCloseTo(skewNormalLogSf(2.2, std(3)), 10);
  });
});

describe('the fit’s fast paths against the exact functions', () => {
  it('tabulated log Φ stays within 1e-9 of the exact one from −60 to 60', () => {
    let worst = 0;
    for (let i = 0; i <= 24_000; i += 1) {
      const x = -60 + i * 0.005 + 1e-4 * (i % 7);
      worst = Math.max(worst, Math.abs(normalLogCdfFast(x) - normalLogCdf(x)));
    }
    expect(worst).toBeLessThan(1e-9);
    expect(normalLogCdfFast(-Infinity)).toBe(-Infinity);
  });

  it('the integrated KS distance equals the per-decoy tail reading to 1e-6', () => {
    for (const [shape, seed] of [
      [0, 1],
      [-4, 2],
      [12, 3],
    ] as const) {
      const xs = skewNormalSample(200, 1, 2, shape, seed);
      const d = fitSkewNormal(xs).distribution;
      const sorted = [...xs].sort((a, b) => a - b);
      let exact = 0;
      for (const [i, x] of sorted.entries()) {
        const f = skewNormalCdf(x, d);
        exact = Math.max(exact, Math.abs(f - i / 200), Math.abs((i + 1) / 200 - f));
      }
      expect(Math.abs(ksDistance(xs, d) - exact)).toBeLessThan(1e-6);
    }
  });

  it('the tabulated and exact likelihood searches give the same extrapolated exposure to 1e-3 bits', () => {
    const decoys = skewNormalSample(1000, -3, 2, -3, 7);
    const a = extrapolatedExposure(0, decoys);
    const b = extrapolatedExposure(0, decoys, { likelihood: 'exact' });
    expect(Math.abs((a.fitted_exposure as number) - (b.fitted_exposure as number))).toBeLessThan(1e-3);
  });
});

describe('fitSkewNormal (maximum likelihood)', () => {
  it("recovers TF Privacy's test distribution skewnorm(4, 0, 1) from 10,000 draws", () => {
    // tensorflow/privacy secret_sharer/exposures_test.py draws its references from skewnorm(a=4, loc=0, scale=1).
    const fit = fitSkewNormal(skewNormalSample(10_000, 0, 1, 4, 11));
    expect(fit.method).toBe('mle');
    expect(fit.distribution.shape).toBeGreaterThan(3.3);
    expect(fit.distribution.shape).toBeLessThan(4.7);
    expect(fit.distribution.location).toBeCloseTo(0, 1);
    expect(fit.distribution.scale).toBeCloseTo(1, 1);
  });

  it('beats the method-of-moments start on likelihood', () => {
    const xs = skewNormalSample(1000, 2, 3, -5, 5);
    const fit = fitSkewNormal(xs);
    const mom = skewNormalMoments(xs);
    expect(fit.logLikelihood).toBeGreaterThan(skewNormalLogLikelihood(xs, mom));
    expect(ksDistance(xs, fit.distribution)).toBeLessThan(1.36 / Math.sqrt(1000));
  });

  it('refuses constant or too few scores', () => {
    expect(() => fitSkewNormal([1, 1, 1, 1])).toThrow(/all scores are equal/);
    expect(() => fitSkewNormal([1, 2])).toThrow(/at least 3/);
  });
});

describe('extrapolatedExposure', () => {
  it("is TF Privacy's −log2 F_fit(perplexity) on negated scores", () => {
    // TF Privacy: exposure = −log2 skewnorm.cdf(perplexity, *skewnorm.fit(references)); here scores
    // are log-probabilities (higher = more likely), so a perplexity p is the score −p.
    const refs = skewNormalSample(2000, 0, 1, 4, 3);
    const secrets = [-1.2, 0.1];
    const fit = fitSkewNormal(refs);
    const mirrored = {
      location: -fit.distribution.location,
      scale: fit.distribution.scale,
      shape: -fit.distribution.shape,
    };
    const scores = refs.map((p) => -p);
    for (const p of secrets) {
      const tfStyle = -Math.log2(skewNormalCdf(p, fit.distribution));
      const r = extrapolatedExposure(-p, scores);
      expect(r.fitted_exposure as number).toBeCloseTo(tfStyle, 2);
      expect(r.fitted_exposure as number).toBeCloseTo(-skewNormalLogSf(-p, mirrored) / Math.LN2, 2);
    }
  });

  it('reads beyond the rank ceiling on a good fit, near the exact tail', () => {
    const decoys = skewNormalSample(1000, -3, 2, -3, 7);
    const trueScore = 0;
    const exact = -skewNormalLogSf(trueScore, { location: -3, scale: 2, shape: -3 }) / Math.LN2; // 24.1 bits
    const r = extrapolatedExposure(trueScore, decoys);
    expect(r.status).toBe('ok');
    expect(r.rank_ceiling).toBeCloseTo(Math.log2(1001), 10);
    expect(r.exposure as number).toBeGreaterThan(r.rank_ceiling);
    expect(Math.abs((r.exposure as number) - exact)).toBeLessThan(2);
  });

  it('withholds a value above the ceiling when the fit is poor, flags one below', () => {
    // Two clusters: no skew-normal describes them, and the tail check sees it.
    const decoys = [...skewNormalSample(900, 0, 1, 0, 1), ...skewNormalSample(100, 6, 0.3, 0, 2)];
    const high = extrapolatedExposure(12, decoys);
    expect(high.status).toBe('withheld');
    expect(high.exposure).toBeNull();
    expect(high.fitted_exposure as number).toBeGreaterThan(high.rank_ceiling);
    expect(high.reasons.join(' ')).toMatch(/rank ceiling/);
    const low = extrapolatedExposure(0, decoys);
    expect(low.status).toBe('flagged');
    expect(low.exposure).toBe(low.fitted_exposure);
    expect(low.exposure as number).toBeLessThanOrEqual(low.rank_ceiling);
  });

  it('reports no value when no fit is possible', () => {
    const r = extrapolatedExposure(0, [-1, -1, -1]);
    expect(r.status).toBe('unfit');
    expect(r.exposure).toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import {
  bootstrapMedian,
  bootstrapMedianDifference,
  clusteredSample,
  combineCrossed,
  sampleDesign,
  studentizedInterval,
} from '../../src/metrics/bootstrap.js';
import { median } from '../../src/metrics/statistics.js';
import { Rng } from '../../src/random.js';
import { coverage, syntheticArm, syntheticPaired } from '../fixtures/synthetic-audit.js';

const components = { run: 1.5, canary: 2, interaction: 1 };

describe('synthetic audits', () => {
  it('are seeded and lay out the design they were asked for', () => {
    const a = syntheticArm(Rng.fromSeed(3), { design: 'crossed', runs: 3, canaries: 4, components });
    const b = syntheticArm(Rng.fromSeed(3), { design: 'crossed', runs: 3, canaries: 4, components });
    expect(a).toEqual(b);
    expect(a.values).toHaveLength(12);
    expect(new Set(a.canaries).size).toBe(4);
    const nested = syntheticArm(Rng.fromSeed(3), { design: 'nested', runs: 3, canaries: 4, components });
    expect(new Set(nested.canaries).size).toBe(12);
    const paired = syntheticPaired(Rng.fromSeed(3), { design: 'crossed', runs: 3, canaries: 4, components }, 2);
    expect(paired.truth).toBe(2);
  });

  it('have the variance components they were built with', () => {
    // Run effect only: the spread of run means across many runs is the run sd.
    const s = syntheticArm(Rng.fromSeed(5), {
      design: 'crossed',
      runs: 400,
      canaries: 2,
      components: { run: 2, canary: 0, interaction: 0 },
    });
    const runMeans = Array.from({ length: 400 }, (_, r) => s.values[2 * r] as number);
    const mean = runMeans.reduce((x, y) => x + y, 0) / 400;
    const sd = Math.sqrt(runMeans.reduce((x, y) => x + (y - mean) ** 2, 0) / 399);
    expect(sd).toBeGreaterThan(1.8);
    expect(sd).toBeLessThan(2.2);
  });
});

describe('design-aware intervals', () => {
  it('reads crossed, nested and flat designs from runs and canaries', () => {
    const crossed = syntheticArm(Rng.fromSeed(1), { design: 'crossed', runs: 3, canaries: 5, components });
    expect(sampleDesign(clusteredSample(crossed.values, crossed.runs, crossed.canaries))).toBe('crossed');
    const nested = syntheticArm(Rng.fromSeed(1), { design: 'nested', runs: 3, canaries: 5, components });
    expect(sampleDesign(clusteredSample(nested.values, nested.runs, nested.canaries))).toBe('nested');
    // A canary missing from one run: not every run holds every canary, so nested.
    expect(
      sampleDesign(clusteredSample(crossed.values.slice(1), crossed.runs.slice(1), crossed.canaries.slice(1))),
    ).toBe('nested');
    // Without units the design cannot be crossed.
    expect(sampleDesign(clusteredSample(crossed.values, crossed.runs))).toBe('nested');
    expect(sampleDesign(clusteredSample([1, 2, 3], ['r', 'r', 'r'], ['a', 'b', 'c']))).toBe('flat');
  });

  it('takes at most 2(R − 1) degrees of freedom from R runs (medianDf)', () => {
    // Canary-dominated, 3 runs: Satterthwaite's ν is near the canaries' 11; the median's interval takes 4.
    const spec = { runs: 3, canaries: 12, components: { run: 0.2, canary: 3, interaction: 0.5 } };
    for (const design of ['crossed', 'nested'] as const) {
      const a = syntheticArm(Rng.fromSeed(5), { ...spec, design });
      const i = bootstrapMedian(clusteredSample(a.values, a.runs, a.canaries), {
        seed: 1,
        label: design,
        resamples: 600,
      });
      expect(i?.method).toBe('studentized');
      expect(i?.df).toBe(4);
    }
    // The mean's closed-form combination itself is not capped (copy rates use it): ν from the terms.
    expect(combineCrossed(0.01, 1, 1.02, 3, 12).df).toBeGreaterThan(4);
  });

  it('combines the two-way and one-way variances into the unbiased ANOVA variance of a mean', () => {
    // Worked by hand for the 2 × 2 table y = [[0, 2], [4, 10]]: grand mean 4, run effects ∓3,
    // canary effects ∓2, residuals ±1. The exact bootstrap variances of the mean are
    // V_R = Σα²/R² = 18/4, V_C = Σβ²/C² = 8/4, V_RC = V_R + V_C + Σε²/(RC)² = 6.5 + 4/16; the
    // ANOVA estimate (MS_R + MS_C − MS_E)/(RC) = (36 + 16 − 4)/4 = 12.
    const v = combineCrossed(4.5, 2, 6.75, 2, 2);
    expect(v.variance).toBeCloseTo(12, 12);
    // Satterthwaite: terms 9, 4, 1 with 1, 1, 1 df → 12² / (81 + 16 + 1).
    expect(v.df).toBeCloseTo(144 / 98, 12);
    // A residual so large that the combination would fall below a one-way term: floored there.
    expect(combineCrossed(4.5, 2, 20, 2, 2)).toMatchObject({ variance: 9, df: 1 });
  });

  it('widens a crossed interval with the run spread and states its design', () => {
    const spread = syntheticArm(Rng.fromSeed(9), {
      design: 'crossed',
      runs: 5,
      canaries: 16,
      components: { run: 3, canary: 0.5, interaction: 0.5 },
    });
    const i = bootstrapMedian(clusteredSample(spread.values, spread.runs, spread.canaries), { seed: 1, label: 'x' });
    const canariesOnly = bootstrapMedian(spread.values, { seed: 1, label: 'x' });
    expect(i).toMatchObject({ resampling: 'crossed', method: 'studentized', n_clusters: 5, n: 80 });
    expect(i?.df).toBeGreaterThan(1);
    expect((i?.hi as number) - (i?.lo as number)).toBeGreaterThan(
      3 * ((canariesOnly?.hi as number) - (canariesOnly?.lo as number)),
    );
    expect(i?.estimate).toBe(median(spread.values));
    expect(canariesOnly).toMatchObject({ resampling: 'flat', method: 'percentile', se: null, df: null });
  });

  it('sums the two sides of a difference and keeps a one-run pair on the percentile path', () => {
    const a = syntheticArm(Rng.fromSeed(4), { design: 'crossed', runs: 3, canaries: 8, components });
    const d = bootstrapMedianDifference(clusteredSample(a.values, a.runs, a.canaries), [0, 0.5, 1, 1.5], {
      seed: 0,
      label: 'd',
    });
    expect(d).toMatchObject({ resampling: 'crossed', method: 'studentized', n_clusters_a: 3, n_clusters_b: 1 });
    const flat = bootstrapMedianDifference([1, 2, 3], [0, 1], { seed: 0, label: 'd' });
    expect(flat).toMatchObject({ resampling: 'flat', method: 'percentile' });
  });

  it('keeps a studentised interval inside the parameter space, not inside the sample', () => {
    // Worked by hand: median 7.7, variance 4 (se 2), 2 df, 95%: t(2) = 4.3027, so 7.7 ∓ 8.6054.
    const free = studentizedInterval(7.7, { variance: 4, df: 2 }, 0.05);
    expect(free.se).toBe(2);
    expect(free.lo).toBeCloseTo(7.7 - 8.6054, 3);
    expect(free.hi).toBeCloseTo(7.7 + 8.6054, 3);
    // Exposure of four-digit codes lies in [0, 13.29]: clipped there.
    const clipped = studentizedInterval(7.7, { variance: 4, df: 2 }, 0.05, [0, 13.29]);
    expect([clipped.lo, clipped.hi]).toEqual([0, 13.29]);
    // Three runs all above the truth 0 (run levels 5, 6, 7; canaries ±0.5): the truth is below
    // every observed value, and the interval must still be free to reach it.
    const values = [4.5, 5, 5.5, 5.5, 6, 6.5, 6.5, 7, 7.5];
    const runs = ['a', 'a', 'a', 'b', 'b', 'b', 'c', 'c', 'c'];
    const units = ['x', 'y', 'z', 'x', 'y', 'z', 'x', 'y', 'z'];
    const i = bootstrapMedian(clusteredSample(values, runs, units), { seed: 1, label: 'all-above' });
    expect(i).toMatchObject({ resampling: 'crossed', method: 'studentized', estimate: 6 });
    const t = studentizedInterval(6, { variance: (i?.se as number) ** 2, df: i?.df as number }, 0.05);
    expect(i?.lo).toBeCloseTo(t.lo, 12);
    expect(i?.lo).toBeLessThan(4.5);
    expect(i?.hi).toBeGreaterThan(7.5);
    const bounded = bootstrapMedian(clusteredSample(values, runs, units), {
      seed: 1,
      label: 'all-above',
      bounds: [4, 8],
    });
    expect([bounded?.lo, bounded?.hi]).toEqual([4, 8]);
  });

  it('covers the true value near 95% on a small simulation (the full table: bench/coverage-normal.ts)', () => {
    // 150 audits, 400 resamples: a binomial 95% band around 0.95 is about ±3.5 points.
    for (const design of ['crossed', 'nested'] as const) {
      const row = coverage({ design, runs: 3, canaries: 12, components }, 'median', 150, 7, 400);
      expect(row.detected).toBe(design);
      expect(row.coverage).toBeGreaterThan(0.88);
      expect(row.coverage).toBeLessThan(0.995);
    }
  });
});

import { describe, expect, it } from 'vitest';
import {
  bootstrapMedian,
  bootstrapMedianDifference,
  clusteredSample,
  TWO_RUNS_FLAG,
  type MedianInterval,
} from '../../src/metrics/bootstrap.js';
import { boundTieShare, rankInterval } from '../../src/metrics/rank-interval.js';
import { Rng } from '../../src/random.js';
import { CEILING, populationTruths, rankExposure, shapedAudit, type ShapedSpec } from '../fixtures/shaped-audit.js';

/** 3 runs × 12 canaries, the same canaries in every run: canaries 0–6 at the ceiling in every run (58%), the rest spread below. */
function ceilingHeavy(): { values: number[]; runs: string[]; canaries: string[] } {
  const out = { values: [] as number[], runs: [] as string[], canaries: [] as string[] };
  for (let r = 0; r < 3; r += 1) {
    for (let c = 0; c < 12; c += 1) {
      out.values.push(c < 7 ? CEILING : rankExposure(3 + 0.5 * c + 0.5 * r).exposure);
      out.runs.push(`r${r}`);
      out.canaries.push(`c${c}`);
    }
  }
  return out;
}

describe('medians read on the ranks', () => {
  it('give the textbook order-statistic interval for one run of 20 distinct values: [x(6), x(15)]', () => {
    // Wilson's lower bound for 15/20 at 95% is 0.531 > 1/2, for 14/20 it is 0.481: so the median is
    // at least the value with 15 at or above it (x(6)) and at most the one with 15 at or below it (x(15)).
    const values = Array.from({ length: 20 }, (_, i) => i + 1);
    expect(rankInterval(clusteredSample(values), 0.05, [0, 21])).toEqual({ lo: 6, hi: 15 });
  });

  it('measure the pile at an end of the parameter space only where the median can land on it', () => {
    expect(
      boundTieShare([...Array(46).fill(CEILING), ...Array.from({ length: 54 }, (_, i) => i / 10)], [0, CEILING]),
    ).toBeCloseTo(0.46, 12);
    // A pile at the floor in the lowest tenth: outside the middle half, the median cannot reach it.
    expect(
      boundTieShare([...Array(10).fill(0), ...Array.from({ length: 90 }, (_, i) => 1 + i / 10)], [0, CEILING]),
    ).toBe(0);
    expect(boundTieShare([1.5, 2.5, 3.5], [0, CEILING])).toBe(0);
  });

  it('do not collapse where more than half the values sit at the ceiling', () => {
    const s = ceilingHeavy();
    const sample = clusteredSample(s.values, s.runs, s.canaries);
    const i = bootstrapMedian(sample, {
      seed: 1,
      label: 'ceiling',
      resamples: 300,
      bounds: [0, CEILING],
    }) as MedianInterval;
    expect(i).toMatchObject({ estimate: CEILING, hi: CEILING, method: 'rank', resampling: 'crossed', n_clusters: 3 });
    expect(i.flags).toBeUndefined();
    // 7 of 12 canaries (21 of 36 values) at the ceiling: too few to be sure the population median is there.
    expect(i.lo).toBeLessThan(CEILING - 1);
  });

  it('difference the two sides’ intervals when either side is piled at the ceiling', () => {
    const s = ceilingHeavy();
    const heldOut = clusteredSample(
      [0, 0.5, 1, 0, 0.3, 2, 0.1, 0, 0.7],
      ['r0', 'r0', 'r0', 'r1', 'r1', 'r1', 'r2', 'r2', 'r2'],
      ['h0', 'h1', 'h2', 'h0', 'h1', 'h2', 'h0', 'h1', 'h2'],
    );
    const options = { seed: 3, label: 'd', resamples: 200 };
    const focal = clusteredSample(s.values, s.runs, s.canaries);
    const d = bootstrapMedianDifference(focal, heldOut, {
      ...options,
      bounds: [-CEILING, CEILING],
      sideBounds: [0, CEILING],
    });
    const a = bootstrapMedian(focal, { ...options, label: 'd|a', bounds: [0, CEILING] }) as MedianInterval;
    const b = bootstrapMedian(heldOut, { ...options, label: 'd|b', bounds: [0, CEILING] }) as MedianInterval;
    expect(d).toMatchObject({ method: 'bounds', resampling: 'crossed', estimate: a.estimate - b.estimate });
    expect(d?.lo).toBeCloseTo(a.lo - b.hi, 12);
    expect(d?.hi).toBeCloseTo(Math.min(CEILING, a.hi - b.lo), 12);
    // Without side bounds nothing is known to be piled at an end: the studentised path, as before.
    expect(bootstrapMedianDifference(focal, heldOut, { ...options, bounds: [-CEILING, CEILING] })?.method).toBe(
      'studentized',
    );
  });

  it('flag 2 runs per arm and nothing for 3', () => {
    const two = clusteredSample(
      [1, 2, 3, 4, 2, 3, 4, 5],
      ['a', 'a', 'a', 'a', 'b', 'b', 'b', 'b'],
      ['c0', 'c1', 'c2', 'c3', 'c0', 'c1', 'c2', 'c3'],
    );
    expect(bootstrapMedian(two, { seed: 1, label: 'two', resamples: 100 })?.flags).toEqual([TWO_RUNS_FLAG]);
    const three = clusteredSample(
      [1, 2, 3, 4, 2, 3, 4, 5, 1.5, 2.5, 3.5, 4.5],
      [...'aaaabbbbcccc'],
      ['c0', 'c1', 'c2', 'c3', 'c0', 'c1', 'c2', 'c3', 'c0', 'c1', 'c2', 'c3'],
    );
    expect(bootstrapMedian(three, { seed: 1, label: 'three', resamples: 100 })?.flags).toBeUndefined();
  });
});

describe('audits shaped like real ones', () => {
  const spec: ShapedSpec = {
    design: 'crossed',
    runs: 3,
    canaries: 12,
    mu: 12.95,
    sd: { run: 1.5, canary: 2.5, interaction: 1.5 },
    shape: 'normal',
    transform: 'rank',
    heldOut: { mu: 0.5, sd: { run: 0.5, canary: 1.5, interaction: 0.5 }, shape: 'right-skewed', canaries: 12 },
    paired: { shift: 1, sd: { run: 1, canary: 1, interaction: 1 } },
    copy: { mu: 0, sd: { run: 1.5, canary: 1, interaction: 0.5 } },
  };

  it('measure exposure through the rank transform: discrete, floor 0, ceiling log2|C|', () => {
    expect(rankExposure(20)).toEqual({ exposure: CEILING, rank: 1 });
    expect(rankExposure(-3)).toEqual({ exposure: 0, rank: 10000 });
    expect(rankExposure(12.5).rank).toBe(2);
    const a = shapedAudit(Rng.fromSeed(2), spec);
    expect(a.focal.values).toHaveLength(36);
    expect(new Set(a.focal.canaries).size).toBe(12);
    expect(a.focal.values.every((v) => v >= 0 && v <= CEILING)).toBe(true);
    expect(a.focal.recovered).toEqual(a.focal.values.map((v) => v === CEILING));
    expect(a).toEqual(shapedAudit(Rng.fromSeed(2), spec));
  });

  it('have the population median of a monotone transform of a symmetric latent: the transform of its centre', () => {
    const t = populationTruths(spec, 20000, 1);
    // Symmetric effects: the latent median is μ = 12.95, ranked 2 (12.29 bits).
    expect(t.median).toBeCloseTo(rankExposure(12.95).exposure, 12);
    expect(t.atCeiling).toBeGreaterThan(0.4);
    expect(t.atCeiling).toBeLessThan(0.52);
    expect(t.recovered).toBe(t.atCeiling);
  });
});

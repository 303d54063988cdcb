import { describe, expect, it } from 'vitest';
import { bootstrapMedian, bootstrapMedianDifference, clusteredSample } from '../../src/metrics/bootstrap.js';
import { derivedSeed, Rng } from '../../src/random.js';
import { median, quantileSorted, selectMedian } from '../../src/metrics/statistics.js';
import { normalQuantile, wilsonInterval } from '../../src/metrics/wilson.js';

describe('wilsonInterval', () => {
  // Newcombe (1998), Statistics in Medicine 17:857–872, Table I, method 3 (Wilson score, no
  // continuity correction).
  it.each([
    [81, 263, 0.2553, 0.3662],
    [15, 148, 0.0624, 0.1605],
    [0, 20, 0.0, 0.1611],
    [1, 29, 0.0061, 0.1718],
  ])('%i/%i gives [%f, %f] (Newcombe 1998)', (k, n, lo, hi) => {
    const p = wilsonInterval(k, n);
    expect(p?.lo).toBeCloseTo(lo, 4);
    expect(p?.hi).toBeCloseTo(hi, 4);
    expect(p?.rate).toBeCloseTo(k / n, 12);
  });

  it('stays inside [0, 1] at the extremes and is null when nothing was measured', () => {
    expect(wilsonInterval(10, 10)).toMatchObject({ hi: 1, rate: 1 });
    expect(wilsonInterval(10, 10)?.lo).toBeCloseTo(0.7225, 4);
    expect(wilsonInterval(0, 0)).toBeNull();
    expect(() => wilsonInterval(3, 2)).toThrow(RangeError);
  });

  it('uses the exact normal quantile', () => {
    expect(normalQuantile(0.975)).toBeCloseTo(1.959963984540054, 8);
    expect(normalQuantile(0.5)).toBeCloseTo(0, 12);
    expect(normalQuantile(0.995)).toBeCloseTo(2.5758293035489, 8);
    expect(normalQuantile(0.001)).toBeCloseTo(-3.0902323061678, 8);
  });
});

describe('median and quantiles', () => {
  it('follows type-7 interpolation', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(quantileSorted([1, 2, 3, 4, 5], 0.25)).toBe(2);
    expect(quantileSorted([10, 20], 0.975)).toBeCloseTo(19.75, 12);
    expect(() => median([])).toThrow(RangeError);
  });
});

describe('median by selection', () => {
  it('equals the sorted type-7 median for every size, with ties and duplicates', () => {
    const rng = Rng.fromSeed(11);
    for (let n = 1; n <= 200; n += 1) {
      for (const spread of [3, 1000]) {
        const xs = Float64Array.from({ length: n }, () => rng.int(spread) / 7 - 10);
        const sorted = Float64Array.from(xs).sort();
        expect(selectMedian(Float64Array.from(xs), n)).toBe(quantileSorted(sorted, 0.5));
      }
    }
    // The bootstrap gives the same intervals whichever way it finds each resample's median.
    const values = Array.from({ length: 90 }, () => rng.int(50) / 3);
    const flat = clusteredSample(values);
    const runs = clusteredSample(
      values,
      values.map((_, i) => `r${i % 7}`),
    );
    for (const sample of [flat, runs, clusteredSample([3.5]), clusteredSample([2, 1], ['a', 'b'])]) {
      const reference = bootstrapMedian(sample, { seed: 2, label: 'm', median: 'sort' });
      expect(bootstrapMedian(sample, { seed: 2, label: 'm', median: 'select' })).toEqual(reference);
      expect(bootstrapMedian(sample, { seed: 2, label: 'm' })).toEqual(reference);
    }
    const reference = bootstrapMedianDifference(runs, flat, { seed: 2, label: 'd', median: 'sort' });
    expect(bootstrapMedianDifference(runs, flat, { seed: 2, label: 'd', median: 'select' })).toEqual(reference);
    expect(bootstrapMedianDifference(runs, flat, { seed: 2, label: 'd', median: 'count' })).toEqual(reference);
    // Only the first n values count.
    expect(selectMedian(Float64Array.of(5, 1, 3, 100, -100), 3)).toBe(3);
  });
});

describe('seeded bootstrap', () => {
  const sample = [0.1, 0.4, 2.3, 5.1, 5.3, 7.9, 8.8, 9.2, 13.29, 13.29, 1.2, 0.0];

  it('is identical for the same seed and label, and changes with either', () => {
    // Distinct, unevenly spaced values: the percentile bounds interpolate, so any change in the
    // resamples moves them.
    const wide = Array.from({ length: 40 }, (_, i) => ((i * i) % 17) + i / 7);
    const a = bootstrapMedian(wide, { seed: 7, label: 'g1' });
    const b = bootstrapMedian(wide, { seed: 7, label: 'g1' });
    expect(a).toEqual(b);
    const c = bootstrapMedian(wide, { seed: 8, label: 'g1' });
    const d = bootstrapMedian(wide, { seed: 7, label: 'g2' });
    expect([c?.lo, c?.hi]).not.toEqual([a?.lo, a?.hi]);
    expect([d?.lo, d?.hi]).not.toEqual([a?.lo, a?.hi]);
  });

  it('reports the sample median with an interval that contains it', () => {
    const m = bootstrapMedian(sample, { seed: 1, label: 'x' });
    expect(m?.estimate).toBe(median(sample));
    expect(m?.n).toBe(sample.length);
    expect(m?.lo).toBeLessThanOrEqual(m?.estimate as number);
    expect(m?.hi).toBeGreaterThanOrEqual(m?.estimate as number);
    expect(m?.lo).toBeGreaterThanOrEqual(0);
    expect(m?.hi).toBeLessThanOrEqual(13.29);
  });

  it('degenerates honestly: one value gives a point interval, no value gives null', () => {
    expect(bootstrapMedian([4.2], { seed: 1, label: 'x' })).toEqual({
      estimate: 4.2,
      lo: 4.2,
      hi: 4.2,
      n: 1,
      n_clusters: 1,
      resampling: 'flat',
      method: 'percentile',
      se: null,
      df: null,
    });
    expect(bootstrapMedian([], { seed: 1, label: 'x' })).toBeNull();
  });

  it('narrows as n grows (same spread, 16x the data)', () => {
    const small = [1, 2, 3, 4, 5, 6, 7, 8];
    const large = Array.from({ length: 16 }, () => small).flat();
    const s = bootstrapMedian(small, { seed: 3, label: 'w' });
    const l = bootstrapMedian(large, { seed: 3, label: 'w' });
    expect((l?.hi as number) - (l?.lo as number)).toBeLessThan((s?.hi as number) - (s?.lo as number));
  });

  it('takes median(a) − median(b) for independent samples', () => {
    const d = bootstrapMedianDifference([10, 11, 12, 13, 14], [1, 2, 3], { seed: 5, label: 'd' });
    expect(d?.estimate).toBe(10);
    expect(d?.n_a).toBe(5);
    expect(d?.n_b).toBe(3);
    expect(d?.lo).toBeGreaterThan(6);
    expect(d?.hi).toBeLessThan(14);
    expect(bootstrapMedianDifference([1], [], { seed: 5, label: 'd' })).toBeNull();
  });

  it('draws from a reproducible generator', () => {
    const a = Rng.fromSeed(42);
    const b = Rng.fromSeed(42);
    const xs = Array.from({ length: 5 }, () => a.nextU32());
    expect(Array.from({ length: 5 }, () => b.nextU32())).toEqual(xs);
    expect(new Set(xs).size).toBe(5);
    expect(derivedSeed(0, 'a')).toBe(derivedSeed(0, 'a'));
    expect(derivedSeed(0, 'a')).not.toBe(derivedSeed(0, 'b'));
    // Roughly uniform: 10,000 draws in [0, 10) hit each bucket 1,000 ± 150 times.
    const r = Rng.fromSeed(9);
    const buckets = new Array<number>(10).fill(0);
    for (let i = 0; i < 10000; i += 1) {
      const k = r.scaledInt(10);
      buckets[k] = (buckets[k] as number) + 1;
    }
    for (const count of buckets) expect(Math.abs(count - 1000)).toBeLessThan(150);
  });
});

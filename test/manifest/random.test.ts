import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/random.js';

describe('Rng', () => {
  it('is a pure function of its key', () => {
    const a = new Rng(7, 'placement', 'late');
    const b = new Rng(7, 'placement', 'late');
    const c = new Rng(7, 'placement', 'early');
    const xs = Array.from({ length: 50 }, () => a.nextU32());
    expect(Array.from({ length: 50 }, () => b.nextU32())).toEqual(xs);
    expect(Array.from({ length: 50 }, () => c.nextU32())).not.toEqual(xs);
    // Key parts are separated: ("ab","c") and ("a","bc") are different streams.
    expect(new Rng('ab', 'c').nextU32()).not.toBe(new Rng('a', 'bc').nextU32());
  });

  it('draws integers in range, roughly uniformly', () => {
    const rng = new Rng('uniform');
    const counts = new Array<number>(10).fill(0);
    let outside = 0;
    for (let i = 0; i < 20_000; i += 1) {
      const x = rng.int(10);
      if (!(x >= 0 && x < 10 && Number.isInteger(x))) outside += 1;
      else counts[x] = (counts[x] as number) + 1;
    }
    expect(outside).toBe(0);
    // Each bucket expects 2,000 (sd ≈ 42); 300 is beyond seven standard deviations.
    for (const n of counts) expect(Math.abs(n - 2000)).toBeLessThan(300);
    expect(() => rng.int(0)).toThrow(RangeError);
  });

  it('samples without replacement and shuffles to a permutation', () => {
    const rng = new Rng('sample');
    const items = Array.from({ length: 30 }, (_, i) => i);
    const s = rng.sample(items, 12);
    expect(new Set(s).size).toBe(12);
    expect(items).toEqual(Array.from({ length: 30 }, (_, i) => i));
    expect([...rng.shuffle([...items])].sort((a, b) => a - b)).toEqual(items);
    expect(() => rng.sample(items, 31)).toThrow(RangeError);
  });

  it('draws blocks of scaled integers exactly as one scaledInt call each, and continues the stream', () => {
    const one = Rng.fromSeed(11);
    const block = Rng.fromSeed(11);
    const out = new Int32Array(3000);
    for (const n of [1, 2, 7, 64, 2112, 3000]) {
      block.scaledInts(out, n, n);
      expect(Array.from(out.subarray(0, n))).toEqual(Array.from({ length: n }, () => one.scaledInt(n)));
    }
    block.scaledInts(out, 5, 33);
    expect(Array.from(out.subarray(0, 5))).toEqual(Array.from({ length: 5 }, () => one.scaledInt(33)));
    expect(block.nextU32()).toBe(one.nextU32());
  });
});

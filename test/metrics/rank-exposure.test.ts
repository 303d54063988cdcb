import { describe, expect, it } from 'vitest';
import { candidateIndex, exhaustiveIndex } from '../../src/metrics/candidate-index.js';
import { exposure, exposureCeiling } from '../../src/metrics/exposure.js';
import { RankInputError, rankOfIndex } from '../../src/metrics/rank.js';

describe('rankOfIndex', () => {
  it('ranks a strictly best code first', () => {
    const r = rankOfIndex([-3, -1, -2, -9], 1);
    expect(r).toEqual({ rank: 1, ties: 0, trueScore: -1, bestOtherScore: -2 });
  });

  it('counts every candidate scoring at least the true code', () => {
    // Two above (-1, -2), true -3, one below.
    expect(rankOfIndex([-1, -3, -2, -9], 1).rank).toBe(3);
  });

  it('counts ties against the secret', () => {
    // True code ties with two others and is beaten by one: rank 1 + 1 + 2 = 4.
    const r = rankOfIndex([-5, -5, -1, -5, -9], 0);
    expect(r.rank).toBe(4);
    expect(r.ties).toBe(2);
  });

  it('gives a flat score vector the worst rank, not the best', () => {
    const flat = new Float32Array(10000).fill(-9.21);
    expect(rankOfIndex(flat, 4821).rank).toBe(10000);
    expect(exposure(rankOfIndex(flat, 4821).rank, 10000)).toBe(0);
  });

  it('matches TensorFlow Privacy: perplexity 3.5 among references 1..16 has rank 4', () => {
    // TF Privacy ranks by perplexity (lower is better); scores are log-probabilities, so negate.
    const references = Array.from({ length: 16 }, (_, i) => -(i + 1));
    const scores = [...references, -3.5];
    expect(rankOfIndex(scores, 16).rank).toBe(4);
  });

  it('matches TensorFlow Privacy on ties: a reference equal to the secret is ranked ahead of it', () => {
    const scores = [-1, -2, -3, -2];
    expect(rankOfIndex(scores, 3).rank).toBe(3);
  });

  it('refuses NaN scores and bad indices', () => {
    expect(() => rankOfIndex([Number.NaN, -1], 1)).toThrow(RankInputError);
    expect(() => rankOfIndex([-1, Number.NaN], 1)).toThrow(/NaN/);
    expect(() => rankOfIndex([-1, -2], 2)).toThrow(/outside/);
    expect(() => rankOfIndex([-1], 0)).toThrow(/at least 2/);
  });

  it('accepts -Infinity (a probability that underflowed) as a real, lowest score', () => {
    expect(rankOfIndex([-Infinity, -1, -Infinity], 1).rank).toBe(1);
    expect(rankOfIndex([-Infinity, -1, -Infinity], 0).rank).toBe(3);
  });
});

describe('rankOfIndex: candidate order decides nothing', () => {
  it('gives the same rank and ties wherever the tied candidates sit (all 24 orders of four)', () => {
    // True code scores −2; two others tie it, one is above: rank 4, ties 2, in every order.
    const scores = [-2, -2, -1, -2];
    const orders: number[][] = [];
    const permute = (rest: number[], acc: number[]): void => {
      if (rest.length === 0) orders.push(acc);
      rest.forEach((x, i) => permute([...rest.slice(0, i), ...rest.slice(i + 1)], [...acc, x]));
    };
    permute([0, 1, 2, 3], []);
    expect(orders).toHaveLength(24);
    for (const order of orders) {
      const r = rankOfIndex(
        order.map((i) => scores[i] as number),
        order.indexOf(0),
      );
      expect(r).toMatchObject({ rank: 4, ties: 2 });
    }
  });
});

describe('exposure', () => {
  it('has ceiling log2|C|: 13.29 for 10,000 codes, 14.29 for a code plus 19,999 decoys', () => {
    expect(exposureCeiling(10000)).toBeCloseTo(13.2877, 4);
    expect(exposureCeiling(20000)).toBeCloseTo(14.2877, 4);
    expect(exposure(1, 10000)).toBe(exposureCeiling(10000));
  });

  it('is log2|C| − log2(rank)', () => {
    expect(exposure(10000, 10000)).toBe(0);
    expect(exposure(16, 10000)).toBeCloseTo(Math.log2(10000) - 4, 12);
    expect(exposure(4, 17)).toBeCloseTo(Math.log2(17) - 2, 12);
    // Sampled space of a code + 99 decoys: ranked 25th of 100 is 2 bits.
    expect(exposure(25, 100)).toBeCloseTo(2, 12);
  });

  it('rejects ranks outside [1, |C|] and spaces smaller than 2', () => {
    expect(() => exposure(0, 10)).toThrow(RangeError);
    expect(() => exposure(11, 10)).toThrow(RangeError);
    expect(() => exposure(1.5, 10)).toThrow(RangeError);
    expect(() => exposureCeiling(1)).toThrow(RangeError);
  });
});

describe('candidate index', () => {
  it('reads an exhaustive code as a base-|alphabet| number', () => {
    expect(exhaustiveIndex('0000', '0123456789', 4)).toBe(0);
    expect(exhaustiveIndex('4821', '0123456789', 4)).toBe(4821);
    expect(exhaustiveIndex('9999', '0123456789', 4)).toBe(9999);
    expect(exhaustiveIndex('ba', 'ab', 2)).toBe(2);
    expect(exhaustiveIndex('48a1', '0123456789', 4)).toBe(-1);
    expect(exhaustiveIndex('482', '0123456789', 4)).toBe(-1);
  });

  it('looks codes up in a sampled candidate list', () => {
    const space = { kind: 'sampled' as const, alphabet: '0123456789', length: 4, size: 3 };
    expect(candidateIndex(space, '0042', ['1111', '0042', '2222'])).toBe(1);
    expect(candidateIndex(space, '3333', ['1111', '0042', '2222'])).toBe(-1);
  });
});

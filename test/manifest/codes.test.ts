import { describe, expect, it } from 'vitest';
import {
  codeAt,
  compareCodes,
  DIGITS,
  drawCode,
  indexOfCode,
  sampledCandidates,
  spaceSize,
} from '../../src/codes/space.js';
import { Rng } from '../../src/random.js';

describe('code space', () => {
  it('orders candidates as the code read in base |alphabet|', () => {
    expect(spaceSize(DIGITS)).toBe(10_000);
    expect(codeAt(DIGITS, 0)).toBe('0000');
    expect(codeAt(DIGITS, 42)).toBe('0042');
    expect(codeAt(DIGITS, 9999)).toBe('9999');
    for (const i of [0, 1, 9, 10, 1234, 9999]) expect(indexOfCode(DIGITS, codeAt(DIGITS, i))).toBe(i);
    expect(indexOfCode(DIGITS, '12a4')).toBe(-1);
    expect(indexOfCode(DIGITS, '123')).toBe(-1);
    const hex = { alphabet: '0123456789abcdef', length: 2 };
    expect(indexOfCode(hex, 'ff')).toBe(255);
    expect(compareCodes(hex, '0f', 'a0')).toBeLessThan(0);
  });

  it('draws distinct codes and refuses an exhausted space', () => {
    const tiny = { alphabet: '01', length: 2 };
    const rng = new Rng('codes');
    const taken = new Set<string>();
    const drawn = [0, 1, 2, 3].map(() => drawCode(tiny, rng, taken));
    expect(new Set(drawn).size).toBe(4);
    expect(() => drawCode(tiny, rng, taken)).toThrow(/exhausted/);
  });

  it('builds sampled candidate lists with the true code, distinct, in candidate order', () => {
    const list = sampledCandidates(DIGITS, '4821', 99, new Rng('decoys'));
    expect(list).toHaveLength(100);
    expect(list).toContain('4821');
    expect(new Set(list).size).toBe(100);
    expect([...list].sort()).toEqual(list);
    expect(sampledCandidates(DIGITS, '4821', 99, new Rng('decoys'))).toEqual(list);
  });
});

import { describe, expect, it } from 'vitest';
import { crossedAuc, membershipScore, pooledAuc, zlibBytes } from '../../src/metrics/membership-score.js';

describe('membership scores', () => {
  const x = { exposure: 7.5, log_prob: -6, base_log_prob: -20, secret: '0042' };

  it('orients every score so that larger means more likely trained on', () => {
    expect(membershipScore('exposure', x)).toBe(7.5);
    expect(membershipScore('loss', x)).toBe(-6);
    // Reference ratio: log p_final − log p_base = −6 − (−20).
    expect(membershipScore('reference_ratio', x)).toBe(14);
    expect(membershipScore('reference_ratio', { ...x, base_log_prob: null })).toBeNull();
    expect(membershipScore('zlib_ratio', x)).toBeCloseTo(-6 / zlibBytes('0042'), 12);
  });

  it('measures zlib length in bytes with the zlib header: a repetitive secret compresses better', () => {
    // 2-byte header + deflate block + 4-byte Adler-32: 4 distinct characters take 12 bytes.
    expect(zlibBytes('0042')).toBe(12);
    expect(zlibBytes('a'.repeat(64))).toBeLessThan(zlibBytes('qZ8!x#Lp0@vR$k2m^T7&wN*e5(yB)c9_'.repeat(2)));
  });
});

describe('AUC over canaries crossed with runs', () => {
  it('is the Mann–Whitney statistic with ties counted ½ (known answer)', () => {
    // Pairs: 3>1, 3>2, 3=3 (½), 2>1, 2=2 (½), 2<3: (1+1+0.5+1+0.5+0)/6.
    expect(pooledAuc([3, 2], [1, 2, 3])).toBeCloseTo(4 / 6, 12);
    expect(pooledAuc([], [1])).toBeNull();
  });

  it('gives 1 with a degenerate interval for separated scores, and an interval that covers run variation', () => {
    const member = [true, true, false, false];
    const separated = [
      [5, 6, 1, 2],
      [7, 8, 0, 3],
    ];
    const a = crossedAuc(separated, member, { confidence: 0.95, resamples: 200, seed: 0 });
    expect(a).toMatchObject({ estimate: 1, lo: 1, hi: 1, n_runs: 2, n_in: 2, n_out: 2 });
    // Run 0 separates, run 1 inverts: pooled ½, and the interval spans both.
    const mixed = [
      [5, 6, 1, 2],
      [1, 2, 5, 6],
      [5, 6, 1, 2],
      [1, 2, 5, 6],
    ];
    const b = crossedAuc(mixed, member, { confidence: 0.95, resamples: 400, seed: 1 });
    expect(b?.estimate).toBeCloseTo(0.5, 12);
    expect(b?.lo).toBeLessThan(0.3);
    expect(b?.hi).toBeGreaterThan(0.7);
    // Missing scores are left out, not counted as ties.
    const c = crossedAuc([[5, null, 1, 2]], member, { confidence: 0.95, resamples: 10, seed: 0 });
    expect(c?.estimate).toBe(1);
  });
});

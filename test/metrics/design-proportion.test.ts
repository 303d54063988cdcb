import { describe, expect, it } from 'vitest';
import { designProportion, wilsonInterval } from '../../src/metrics/index.js';

/** `runs` × `canaries` observations; `copied(r, c)` says whether run r copied for canary c. */
function table(runs: number, canaries: number, copied: (r: number, c: number) => boolean | null, nested = false) {
  const values: (boolean | null)[] = [];
  const runIds: string[] = [];
  const units: string[] = [];
  for (let r = 0; r < runs; r += 1) {
    for (let c = 0; c < canaries; c += 1) {
      values.push(copied(r, c));
      runIds.push(`run-${r}`);
      units.push(nested ? `r${r}-f${c}|${1000 + 16 * r + c}` : `f${c}|${1000 + c}`);
    }
  }
  return [values, runIds, units] as const;
}

describe('copy rate pooled over runs (designProportion)', () => {
  it('one run copying 16/16 and two copying 0/16: a wide interval, not Wilson over 48', () => {
    for (const nested of [false, true]) {
      const p = designProportion(...table(3, 16, (r) => r === 0, nested));
      // Run means 1, 0, 0: V = (1/3)(2/3)/(R − 1) = 1/9 in both designs, n_eff = p(1 − p)/V = 2,
      // df = 2, t = 4.3027; Wilson at n = 2 with z = t: [0.01133, 0.95617].
      expect(p).toMatchObject({
        k: 16,
        n: 48,
        n_runs: 3,
        method: 'design-wilson',
        resampling: nested ? 'nested' : 'crossed',
        df: 2,
      });
      expect(p?.rate).toBeCloseTo(1 / 3, 12);
      expect(p?.n_eff).toBeCloseTo(2, 10);
      expect(p?.lo).toBeCloseTo(0.011329923, 6);
      expect(p?.hi).toBeCloseTo(0.956170077, 6);
      expect(p?.runs).toEqual([
        { run_id: 'run-0', k: 16, n: 16 },
        { run_id: 'run-1', k: 0, n: 16 },
        { run_id: 'run-2', k: 0, n: 16 },
      ]);
      const naive = wilsonInterval(16, 48) as { lo: number; hi: number };
      expect(naive.lo).toBeCloseTo(0.216767807, 6);
      expect(naive.hi).toBeCloseTo(0.474598903, 6);
      expect((p?.hi ?? 0) - (p?.lo ?? 0)).toBeGreaterThan(3 * (naive.hi - naive.lo));
    }
  });

  it('one run: Wilson over its canaries, as before', () => {
    const p = designProportion(...table(1, 16, (_, c) => c < 5));
    const w = wilsonInterval(5, 16);
    expect(p).toEqual({
      ...w,
      method: 'wilson',
      resampling: 'flat',
      n_runs: 1,
      n_eff: 16,
      df: null,
      runs: [{ run_id: 'run-0', k: 5, n: 16 }],
    });
  });

  it('every run agreeing at 0 (or 1): each run one trial, the exact bound for R trials', () => {
    for (const nested of [false, true]) {
      const none = designProportion(...table(3, 16, () => false, nested));
      // 0 of 3 trials: Clopper–Pearson's upper end 1 − 0.025^(1/3) = 0.70760; no t quantile (the
      // earlier Wilson at n = 3 with z = t(2) gave 0.86055).
      expect(none).toMatchObject({ k: 0, n: 48, lo: 0, n_eff: 3, df: null, method: 'runs-exact' });
      expect(none?.hi).toBeCloseTo(0.707598, 5);
      const all = designProportion(...table(3, 16, () => true, nested));
      expect(all).toMatchObject({ hi: 1, method: 'runs-exact' });
      expect(all?.lo).toBeCloseTo(1 - 0.707598, 5);
    }
    // More runs, a tighter bound: 0 of 5 runs, 1 − 0.025^(1/5) = 0.52182.
    expect(designProportion(...table(5, 16, () => false))?.hi).toBeCloseTo(0.521819, 5);
    // One copied canary shows that runs are not all-or-nothing: the estimated variance applies.
    const one = designProportion(...table(3, 16, (r, c) => r === 0 && c === 0));
    expect(one?.method).toBe('design-wilson');
    expect(one?.hi ?? 1).toBeLessThan(0.4);
  });

  it('nested runs that agree: the within-run floor, with the df of 3 runs (2(R − 1) = 4), not n − R', () => {
    // Every run copies 8 of its 16: between-run variance 0, floored at the within-run binomial
    // part (n/(n − R))·p(1 − p)/n, so n_eff = n − R = 45; df 4 (was 45), t(4) = 2.7764.
    const p = designProportion(...table(3, 16, (_, c) => c < 8, true));
    expect(p).toMatchObject({ k: 24, n: 48, resampling: 'nested', df: 4, method: 'design-wilson' });
    expect(p?.n_eff).toBeCloseTo(45, 10);
    // Wilson at p = ½ is symmetric about ½: half-width z/(1 + z²/n)·√(¼/n + z²/(4n²)).
    const z = 2.776445105;
    const half = (z / (1 + (z * z) / 45)) * Math.sqrt(0.25 / 45 + (z * z) / (4 * 45 * 45));
    expect(p?.lo).toBeCloseTo(0.5 - half, 6);
    expect(p?.hi).toBeCloseTo(0.5 + half, 6);
  });

  it('crossed, the same canaries copied in every run: the canaries are the clusters', () => {
    // Canaries 0–7 copied in every run, 8–15 never: no run effect, canary effects ±1/2,
    // V = C/(C − 1)·Σβ²/C² = 1/60, df = C − 1 = 15, n_eff = (1/4)/(1/60) = 15, t(15) = 2.1314.
    const p = designProportion(...table(3, 16, (_, c) => c < 8));
    expect(p).toMatchObject({ k: 24, n: 48, resampling: 'crossed', df: 15 });
    expect(p?.n_eff).toBeCloseTo(15, 10);
    expect(p?.lo).toBeCloseTo(0.258926992, 6);
    expect(p?.hi).toBeCloseTo(0.741073008, 6);
  });

  it('never narrower than Wilson over n, and leaves unmeasured (null) observations out', () => {
    // Each run copies 8 of 16, a different half each time in a balanced way: no run or canary
    // effect, only interaction; the estimate is floored at n_eff = n.
    const p = designProportion(...table(2, 16, (r, c) => (c % 2 === 0) === (r === 0)));
    expect(p?.n_eff).toBe(32);
    const w = wilsonInterval(16, 32) as { lo: number; hi: number };
    expect(p?.hi ?? 0).toBeGreaterThanOrEqual(w.hi);
    const q = designProportion(...table(3, 4, (r, c) => (c === 3 ? null : r === 0)));
    expect(q).toMatchObject({ k: 3, n: 9, n_runs: 3 });
    expect(designProportion(...table(2, 3, () => null))).toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import { crossedAuc, type AucRun } from '../../src/metrics/privacy-auc.js';
import { membershipAuc } from '../../src/metrics/privacy.js';
import { Rng } from '../../src/random.js';

/** Built cells: runs × canaries, member shift mu + a run's own shift of it, canary and residual noise. */
function cell(seed: number, runs: number, nIn: number, nOut: number, mu: number, runSd: number): AucRun[] {
  const rng = new Rng('auc-cell', seed);
  const g = (): number => Math.sqrt(-2 * Math.log(1 - rng.float())) * Math.cos(2 * Math.PI * rng.float());
  const canary = Array.from({ length: nIn + nOut }, (_, k) => ({ key: `c${k}`, member: k < nIn, effect: g() }));
  return Array.from({ length: runs }, (_, r) => {
    const shift = mu + runSd * g();
    return {
      run_id: `r${r}`,
      canaries: canary.map((c) => ({
        key: c.key,
        member: c.member,
        score: 3 * r + c.effect + g() + (c.member ? shift : 0),
      })),
    };
  });
}

describe('crossed AUC (canaries × runs)', () => {
  it('is the mean of the runs’ own AUCs: a run shifting every score counts as no signal', () => {
    const runs = cell(1, 4, 20, 20, 1, 0.3);
    const a = crossedAuc(runs, { seed: 3, resamples: 600 }) as NonNullable<ReturnType<typeof crossedAuc>>;
    const mean = runs.reduce((s, r) => s + (membershipAuc(r.canaries)?.estimate as number), 0) / runs.length;
    expect(a.estimate).toBeCloseTo(mean, 12);
    expect(a.design).toBe('crossed');
    expect(a.method).toBe('studentized');
    expect([a.runs, a.n_in, a.n_out]).toEqual([4, 20, 20]);
    expect(a.lo).toBeLessThan(a.estimate);
    expect(a.hi).toBeGreaterThan(a.estimate);
    expect(a.components?.runs).toBe(4);
  });

  it('widens when runs disagree, and gives the same interval in any input order', () => {
    const calm = crossedAuc(cell(2, 5, 25, 25, 1, 0), { seed: 1, resamples: 900 }) as NonNullable<
      ReturnType<typeof crossedAuc>
    >;
    const noisy = crossedAuc(cell(2, 5, 25, 25, 1, 1.5), { seed: 1, resamples: 900 }) as NonNullable<
      ReturnType<typeof crossedAuc>
    >;
    expect((noisy.components?.run as number) > (calm.components?.run as number)).toBe(true);
    expect(noisy.hi - noisy.lo).toBeGreaterThan(calm.hi - calm.lo);
    const runs = cell(4, 3, 15, 15, 0.8, 0.5);
    const shuffled = runs.map((r) => ({ ...r, canaries: new Rng('o', r.run_id).shuffle([...r.canaries]) })).reverse();
    const a = crossedAuc(runs, { seed: 9, resamples: 600 });
    const b = crossedAuc(shuffled, { seed: 9, resamples: 600 });
    expect(b?.estimate).toBeCloseTo(a?.estimate as number, 12);
    expect(b?.lo).toBeCloseTo(a?.lo as number, 12);
    expect(b?.hi).toBeCloseTo(a?.hi as number, 12);
  });

  it('is ½ with an interval around it on uninformative (all tied) canaries', () => {
    const runs: AucRun[] = [0, 1, 2].map((r) => ({
      run_id: `r${r}`,
      canaries: Array.from({ length: 20 }, (_, k) => ({ key: `c${k}`, member: k % 2 === 0, score: 13.29 })),
    }));
    const a = crossedAuc(runs, { resamples: 300 });
    expect(a?.estimate).toBe(0.5);
    expect(a?.lo).toBeLessThanOrEqual(0.5);
    expect(a?.hi).toBeGreaterThanOrEqual(0.5);
  });

  it('falls back to DeLong for one run and to the runs’ spread when canaries differ by run', () => {
    const one = crossedAuc(cell(5, 1, 10, 10, 1, 0));
    expect(one?.design).toBe('flat');
    expect(one?.method).toBe('delong');
    expect(one?.estimate).toBeCloseTo(
      membershipAuc(cell(5, 1, 10, 10, 1, 0)[0]?.canaries ?? [])?.estimate as number,
      12,
    );
    const runs = cell(6, 3, 10, 10, 1, 0.2);
    const nested = runs.map((r, i) => ({ ...r, canaries: r.canaries.map((c) => ({ ...c, key: `${c.key}-${i}` })) }));
    const n = crossedAuc(nested, { resamples: 300 });
    expect(n?.design).toBe('nested');
    expect(n?.df).toBe(2);
    expect(crossedAuc([{ run_id: 'x', canaries: [{ key: 'a', member: true, score: 1 }] }])).toBeNull();
  });
});

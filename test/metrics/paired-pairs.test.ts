import { describe, expect, it } from 'vitest';
import { differingAxes } from '../../src/metrics/cells.js';
import { singleAxisPairs } from '../../src/metrics/paired.js';
import type { RunMeta } from '../../src/metrics/space-check.js';

const run = (i: number, cell: Record<string, unknown>): RunMeta => ({
  run_id: `r${i}`,
  cell,
  source: `/audit/runs/r${i}/output/result.json`,
  no_canary: false,
});

/** What pairedComparisons did before: every two runs compared. */
function everyPair(runs: RunMeta[], seedAxes: string[]): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < runs.length; i += 1) {
    for (let j = i + 1; j < runs.length; j += 1) {
      const diff = differingAxes((runs[i] as RunMeta).cell, (runs[j] as RunMeta).cell);
      if (diff.length === 1 && !seedAxes.includes(diff[0] as string)) out.push([i, j]);
    }
  }
  return out;
}

describe('singleAxisPairs', () => {
  it('finds the same pairs, in the same order, as comparing every two runs', () => {
    // Replicated cells, a value object, a null, an axis some cells lack (missing = null), duplicates.
    const runs: RunMeta[] = [];
    let k = 0;
    for (const seed of [0, 1, 2]) {
      for (const visibility of ['visible', 'redacted', 'encoded:binary']) {
        for (const dose of [1, 4, null]) {
          runs.push(run(k++, { visibility, dose, seed, placement: { window: [0, 0.5] } }));
          if (dose === 4) runs.push(run(k++, { visibility, dose, seed }));
        }
      }
    }
    runs.push(run(k++, { visibility: 'visible', dose: 1, seed: 0, placement: { window: [0, 0.5] } }));
    // Shuffled deterministically: the order of the pairs follows the runs' order.
    const shuffled = runs
      .map((r, i) => ({ r, key: (i * 7919) % 101 }))
      .sort((a, b) => a.key - b.key)
      .map((x) => x.r);
    for (const list of [runs, shuffled]) {
      const expected = everyPair(list, ['seed']);
      expect(expected.length).toBeGreaterThan(50);
      expect(singleAxisPairs(list, ['seed'])).toEqual(expected);
      expect(singleAxisPairs(list, [])).toEqual(everyPair(list, []));
    }
  });

  it('grows with the pairs there are, not with runs squared', () => {
    // 6 cells x 2,000 seeds: 12,000 runs, 9 pairs per seed.
    const runs: RunMeta[] = [];
    for (let seed = 0; seed < 2000; seed += 1)
      for (const visibility of ['visible', 'redacted'])
        for (const dose of [1, 4, 16]) runs.push(run(runs.length, { visibility, dose, seed }));
    expect(singleAxisPairs(runs, ['seed'])).toHaveLength(9 * 2000);
  });
});

import { describe, expect, it } from 'vitest';
import {
  InfeasiblePlacement,
  placeCohort,
  SlotBoard,
  updateRange,
  type CohortRequest,
} from '../../src/manifest/placement.js';
import { Rng } from '../../src/random.js';

/** Checks every placement rule for one cohort's result. */
function checkCohort(positions: number[][], req: CohortRequest, batch: number): void {
  expect(positions).toHaveLength(req.count);
  for (const rows of positions) {
    expect(rows).toHaveLength(req.dose);
    expect([...rows].sort((a, b) => a - b)).toEqual(rows);
    const updates = rows.map((r) => Math.floor(r / batch));
    expect(new Set(updates).size).toBe(req.dose);
    for (const u of updates) {
      expect(u).toBeGreaterThanOrEqual(req.range[0]);
      expect(u).toBeLessThan(req.range[1]);
    }
    if (req.spacing !== null)
      for (let k = 1; k < updates.length; k += 1)
        expect((updates[k] as number) - (updates[k - 1] as number)).toBe(req.spacing);
    if (req.final) {
      const last = updates[updates.length - 1] as number;
      expect(last).toBeGreaterThanOrEqual(req.final[0]);
      expect(last).toBeLessThan(req.final[1]);
    }
  }
}

describe('updateRange', () => {
  it('gives early and late windows the same number of updates', () => {
    for (const updates of [10, 192, 2068, 313]) {
      const early = updateRange([0, 0.2], updates);
      const late = updateRange([0.8, 1], updates);
      expect(early[0]).toBe(0);
      expect(late[1]).toBe(updates);
      expect(early[1] - early[0]).toBe(late[1] - late[0]);
      expect(updateRange([0, 1], updates)).toEqual([0, updates]);
    }
    expect(updateRange([0.4, 0.6], 192)).toEqual([77, 115]);
  });

  it('tiles the run: adjacent windows share no update and miss none', () => {
    const U = 97;
    const cuts = [0, 0.13, 0.5, 0.77, 1];
    let next = 0;
    for (let i = 0; i + 1 < cuts.length; i += 1) {
      const [lo, hi] = updateRange([cuts[i] as number, cuts[i + 1] as number], U);
      expect(lo).toBe(next);
      next = hi;
    }
    expect(next).toBe(U);
  });
});

describe('placeCohort (property tests over seeded random requests)', () => {
  it('honours dose, window, spacing, final window and never reuses a row', () => {
    const meta = new Rng('placement-properties');
    for (let trial = 0; trial < 150; trial += 1) {
      const batch = 1 + meta.int(8);
      const updates = 20 + meta.int(200);
      const board = new SlotBoard(updates, batch);
      const used = new Set<number>();
      for (let cohort = 0; cohort < 3; cohort += 1) {
        const a = meta.float() * 0.6;
        const range = updateRange([a, a + 0.2 + meta.float() * (0.8 - a)], updates);
        const span = range[1] - range[0];
        if (span < 2) continue;
        const spaced = meta.int(3) === 0;
        const spacing = spaced ? 1 + meta.int(Math.max(1, Math.floor(span / 4))) : null;
        const maxDose = spacing ? 1 + Math.floor((span - 1) / spacing) : span;
        const dose = 1 + meta.int(Math.min(maxDose, 6));
        const withFinal = !spaced && meta.int(3) === 0;
        const final: [number, number] | null = withFinal ? [range[0] + Math.floor(span / 2), range[1]] : null;
        const req: CohortRequest = { count: 1 + meta.int(4), dose, range, spacing, final, describe: 'test window' };
        let positions: number[][];
        try {
          positions = placeCohort(board, new Rng(trial, cohort), req);
        } catch (error) {
          // Only a full board may refuse a request that fits its window; the shape is checked above.
          expect(error).toBeInstanceOf(InfeasiblePlacement);
          expect((error as InfeasiblePlacement).axis).toBe('population');
          continue;
        }
        checkCohort(positions, req, batch);
        for (const r of positions.flat()) {
          expect(used.has(r)).toBe(false);
          used.add(r);
        }
      }
    }
  });

  it('is deterministic for a given stream', () => {
    const req: CohortRequest = { count: 8, dose: 4, range: [10, 60], spacing: null, final: null, describe: 'w' };
    const a = placeCohort(new SlotBoard(100, 16), new Rng('same'), req);
    const b = placeCohort(new SlotBoard(100, 16), new Rng('same'), req);
    const c = placeCohort(new SlotBoard(100, 16), new Rng('other'), req);
    expect(b).toEqual(a);
    expect(c).not.toEqual(a);
  });

  it('fills a window exactly to capacity, then refuses one more canary', () => {
    const board = new SlotBoard(10, 2);
    const req: CohortRequest = { count: 4, dose: 5, range: [0, 10], spacing: null, final: null, describe: 'w' };
    const placed = placeCohort(board, new Rng('full'), req);
    expect(new Set(placed.flat()).size).toBe(20);
    expect(() => placeCohort(board, new Rng('more'), { ...req, count: 1, dose: 1 })).toThrow(/no room/);
  });

  it('refuses infeasible requests instead of adjusting them', () => {
    const board = new SlotBoard(100, 4);
    const base: CohortRequest = {
      count: 1,
      dose: 4,
      range: [0, 20],
      spacing: null,
      final: null,
      describe: 'placement early',
    };
    expect(() => placeCohort(board, new Rng(1), { ...base, dose: 21 })).toThrow(
      /dose 21 needs 21 distinct updates but placement early spans only 20/,
    );
    expect(() => placeCohort(board, new Rng(1), { ...base, spacing: 7 })).toThrow(
      /gap of 7 updates spans 22 updates, which cannot fit/,
    );
    expect(() => placeCohort(board, new Rng(1), { ...base, final: [50, 60] })).toThrow(/does not overlap/);
    expect(() => placeCohort(board, new Rng(1), { ...base, range: [5, 5] })).toThrow(/holds no update/);
    // Gap 6 over 4 appearances spans 19 updates: the first lands in update 0 or 1 of the 20.
    const first = placeCohort(board, new Rng(1), { ...base, spacing: 6 })[0]?.map((r) => Math.floor(r / 4)) ?? [];
    expect([
      [0, 6, 12, 18],
      [1, 7, 13, 19],
    ]).toContainEqual(first);
  });
});

import { describe, expect, it } from 'vitest';
import { lookSchedule } from '../../src/metrics/sequential.js';
import { PATHS, sequentialPower } from '../../src/metrics/sequential-power.js';
import {
  assumedComponents,
  decisionProbability,
  rescaleComponents,
  scaledVariance,
} from '../../src/metrics/verdict.js';

const sd = { run: 1.5, canary: 2, interaction: 1 };
const pilot = [assumedComponents(sd, 3, 16)];
const fixedAt = (seeds: number, alpha: number, effect: number): number => {
  const v = scaledVariance(rescaleComponents(pilot, seeds, 16), 1, 1);
  return decisionProbability(effect, Math.sqrt(v.variance), v.df, 1, alpha);
};
// Four standard errors of a proportion from PATHS paths.
const mcError = 4 * Math.sqrt(0.25 / PATHS);

describe('sequential power: looks of one growing audit', () => {
  it('one look at α is the fixed design (the copula keeps each look t(df) marginal)', () => {
    for (const effect of [0, 0.5, 2]) {
      const s = sequentialPower(effect, pilot, 16, [{ seeds: 8, alpha: 0.05 }], 1);
      expect(Math.abs((s?.probability as number) - fixedAt(8, 0.05, effect))).toBeLessThan(mcError);
      expect(s?.at_least).toBeCloseTo(fixedAt(8, 0.05, effect), 12);
      expect(s?.independent).toBeCloseTo(fixedAt(8, 0.05, effect), 12);
      expect(s?.expected_seeds).toBe(8);
    }
  });

  it('a look repeated at the same size and α adds nothing (fully correlated), unlike independent looks', () => {
    const p = fixedAt(4, 0.05, 2);
    const s = sequentialPower(
      2,
      pilot,
      16,
      [
        { seeds: 4, alpha: 0.05 },
        { seeds: 4, alpha: 0.05 },
      ],
      1,
    );
    expect(Math.abs((s?.probability as number) - p)).toBeLessThan(mcError);
    expect(s?.independent).toBeCloseTo(1 - (1 - p) ** 2, 12);
  });

  it('a schedule: each look by itself, the bounds around it, and seeds added only while open', () => {
    const schedule = lookSchedule({ min: 3, max: 6, spending: 'pocock', alpha: 0.05 });
    const s = sequentialPower(2, pilot, 16, schedule, 1);
    if (!s) throw new Error('no power');
    const p = schedule.map((l) => fixedAt(l.seeds, l.alpha, 2));
    expect(s.looks.map((l) => l.probability)).toEqual(p.map((x) => expect.closeTo(x, 12)));
    expect(s.at_least).toBeCloseTo(Math.max(...p), 12);
    expect(s.independent).toBeCloseTo(1 - p.reduce((u, x) => u * (1 - x), 1), 12);
    expect(s.probability).toBeGreaterThanOrEqual(s.at_least - mcError);
    expect(s.probability).toBeLessThan(s.independent);
    expect(s.expected_seeds).toBeGreaterThan(3);
    expect(s.expected_seeds).toBeLessThan(6);
    // The same answer on every call (seeded paths).
    expect(sequentialPower(2, pilot, 16, schedule, 1)).toEqual(s);
    // A large effect decides at the first look; seeds stay at min.
    const big = sequentialPower(40, pilot, 16, schedule, 1);
    expect(big?.probability).toBe(1);
    expect(big?.expected_seeds).toBe(3);
  });

  it('cannot say without run-to-run variance', () => {
    expect(sequentialPower(2, [], 16, [{ seeds: 3, alpha: 0.05 }], 1)).toBeNull();
    expect(sequentialPower(2, [assumedComponents(sd, 1, 16)], 16, [{ seeds: 3, alpha: 0.05 }], 1)).toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import { lookSchedule } from '../../src/metrics/sequential.js';
import { sequentialPower } from '../../src/metrics/sequential-power.js';
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

describe('sequential power (looks as independent tests at their own α)', () => {
  it('one look at α is the fixed design', () => {
    const s = sequentialPower(2, pilot, 16, [{ seeds: 8, alpha: 0.05 }], 1);
    expect(s?.probability).toBeCloseTo(fixedAt(8, 0.05, 2), 12);
    expect(s?.at_least).toBeCloseTo(fixedAt(8, 0.05, 2), 12);
    expect(s?.expected_seeds).toBe(8);
  });

  it('combines the looks: 1 − Π(1 − p_k), and seeds added only while open', () => {
    const schedule = lookSchedule({ min: 3, max: 6, spending: 'pocock', alpha: 0.05 });
    const s = sequentialPower(2, pilot, 16, schedule, 1);
    if (!s) throw new Error('no power');
    const p = schedule.map((l) => fixedAt(l.seeds, l.alpha, 2));
    expect(s.looks.map((l) => l.probability)).toEqual(p.map((x) => expect.closeTo(x, 12)));
    const [p1, p2, p3, p4] = p as [number, number, number, number];
    expect(s.probability).toBeCloseTo(1 - (1 - p1) * (1 - p2) * (1 - p3) * (1 - p4), 12);
    expect(s.at_least).toBeCloseTo(Math.max(...p), 12);
    expect(s.expected_seeds).toBeCloseTo(3 + (1 - p1) + (1 - p1) * (1 - p2) + (1 - p1) * (1 - p2) * (1 - p3), 12);
    expect(s.probability).toBeGreaterThanOrEqual(s.at_least);
    // A large effect decides at the first look; seeds stay at min.
    const big = sequentialPower(40, pilot, 16, schedule, 1);
    expect(big?.probability).toBeCloseTo(1, 6);
    expect(big?.expected_seeds).toBeCloseTo(3, 3);
  });

  it('cannot say without run-to-run variance', () => {
    expect(sequentialPower(2, [], 16, [{ seeds: 3, alpha: 0.05 }], 1)).toBeNull();
    expect(sequentialPower(2, [assumedComponents(sd, 1, 16)], 16, [{ seeds: 3, alpha: 0.05 }], 1)).toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import {
  applyLook,
  EMPTY_STATE,
  lookLine,
  lookSchedule,
  spentAlpha,
  type LookReading,
} from '../../src/metrics/sequential.js';

describe('spentAlpha', () => {
  it('gives the Lan–DeMets Pocock- and O’Brien–Fleming-type values (known answers)', () => {
    // α ln(1 + (e − 1) · 0.5) = 0.05 · ln(1.859141)
    expect(spentAlpha('pocock', 0.5, 0.05)).toBeCloseTo(0.0310057, 6);
    // 2 − 2Φ(1.959964 / √0.5) = 2 − 2Φ(2.771808)
    expect(spentAlpha('obrien-fleming', 0.5, 0.05)).toBeCloseTo(0.0055746, 6);
    expect(spentAlpha('pocock', 1, 0.05)).toBeCloseTo(0.05, 12);
    expect(spentAlpha('obrien-fleming', 1, 0.05)).toBeCloseTo(0.05, 8);
    expect(spentAlpha('pocock', 0, 0.05)).toBe(0);
  });

  it('refuses a level or fraction out of range', () => {
    expect(() => spentAlpha('pocock', 0.5, 0)).toThrow(/alpha/);
    expect(() => spentAlpha('pocock', 1.5, 0.05)).toThrow(/fraction/);
  });
});

describe('lookSchedule', () => {
  it('looks at min..max seeds and spends exactly α in all (Pocock, 3 to 10 seeds)', () => {
    const looks = lookSchedule({ min: 3, max: 10, spending: 'pocock', alpha: 0.05 });
    expect(looks.map((l) => l.seeds)).toEqual([3, 4, 5, 6, 7, 8, 9, 10]);
    // First look: f(0.3) = 0.05 · ln(1 + 1.718282 · 0.3)
    expect(looks[0]?.alpha).toBeCloseTo(0.0207868, 6);
    // Look 3 (5 seeds): f(0.5) − f(0.4)
    expect(looks[2]?.alpha).toBeCloseTo(0.0310057 - 0.0261569, 6);
    const total = looks.reduce((s, l) => s + l.alpha, 0);
    expect(total).toBeCloseTo(0.05, 12);
    expect(looks.at(-1)?.spent).toBe(0.05);
    for (const l of looks) expect(l.alpha).toBeGreaterThan(0);
  });

  it('O’Brien–Fleming keeps most of α for the last looks', () => {
    const looks = lookSchedule({ min: 3, max: 10, spending: 'obrien-fleming', alpha: 0.05 });
    expect(looks[0]?.alpha).toBeCloseTo(0.000346, 5);
    const alphas = looks.map((l) => l.alpha);
    expect([...alphas].sort((a, b) => a - b)).toEqual(alphas);
  });

  it('one look when min = max: the fixed design at level α', () => {
    expect(lookSchedule({ min: 4, max: 4, spending: 'pocock', alpha: 0.05 })).toEqual([
      { look: 1, seeds: 4, fraction: 1, spent: 0.05, alpha: 0.05 },
    ]);
  });

  it('refuses min < 2 or max < min', () => {
    expect(() => lookSchedule({ min: 1, max: 4, spending: 'pocock', alpha: 0.05 })).toThrow(/min/);
    expect(() => lookSchedule({ min: 5, max: 4, spending: 'pocock', alpha: 0.05 })).toThrow(/min/);
  });
});

function reading(comparison: string, arms: string[], verdict: LookReading['verdict']): LookReading {
  return {
    comparison,
    arms,
    verdict,
    within_margin: false,
    estimate: 1,
    lo: 0,
    hi: 2,
    n_runs: 3,
    sentence: comparison,
  };
}

describe('applyLook', () => {
  const schedule = lookSchedule({ min: 3, max: 5, spending: 'pocock', alpha: 0.05 });

  it('stops a decided comparison and adds seeds only to the arms of undecided ones', () => {
    const s1 = applyLook(
      EMPTY_STATE,
      schedule[0] as (typeof schedule)[0],
      [reading('A', ['a', 'ctl'], 'higher'), reading('B', ['b', 'ctl'], 'undecided')],
      schedule,
    );
    expect(s1.done).toBe(false);
    expect(s1.stopped).toMatchObject([{ comparison: 'A', reason: 'decided', look: 1, seeds: 3 }]);
    expect(s1.stopped[0]?.alpha).toBe(schedule[0]?.alpha);
    expect(s1.next_arms).toEqual(['b', 'ctl']);
    expect(s1.looks).toEqual([
      { look: 1, seeds: 3, alpha: schedule[0]?.alpha, spent: schedule[0]?.spent, open: ['B'], stopped: ['A'] },
    ]);
    expect(lookLine(s1.looks[0] as (typeof s1.looks)[0], 5, 1)).toBe(
      'look 1: seed 3 of ≤5 — 1 comparison undecided, 1 decided (stopped)',
    );

    // Look 2: A's reading changed (more seeds in the shared control) but its verdict stands.
    const s2 = applyLook(
      s1,
      schedule[1] as (typeof schedule)[0],
      [reading('A', ['a', 'ctl'], 'undecided'), reading('B', ['b', 'ctl'], 'undecided')],
      schedule,
    );
    expect(s2.stopped.map((s) => s.comparison)).toEqual(['A']);
    expect(s2.stopped[0]?.verdict).toBe('higher');
    expect(s2.done).toBe(false);

    // Last look: B stops at max, undecided, with the last look's α.
    const s3 = applyLook(s2, schedule[2] as (typeof schedule)[0], [reading('B', ['b', 'ctl'], 'undecided')], schedule);
    expect(s3.done).toBe(true);
    expect(s3.next_arms).toEqual([]);
    expect(s3.stopped[1]).toMatchObject({ comparison: 'B', reason: 'max', look: 3, seeds: 5, verdict: 'undecided' });
    expect(s3.stopped[1]?.alpha).toBe(schedule[2]?.alpha);
  });

  it('is done at the first look when every comparison is decided', () => {
    const s = applyLook(
      EMPTY_STATE,
      schedule[0] as (typeof schedule)[0],
      [reading('A', ['a'], 'equivalent'), reading('B', ['b'], 'lower')],
      schedule,
    );
    expect(s.done).toBe(true);
    expect(s.next_arms).toEqual([]);
    expect(s.stopped.map((x) => x.reason)).toEqual(['decided', 'decided']);
  });
});

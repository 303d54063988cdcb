import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeReport } from '../../src/report/index.js';
import { powerHint } from '../../src/report/verdicts.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

const canaries = (visibility: string) =>
  Array.from({ length: 8 }, (_, i) => ({ id: `f00${i}`, code: String(1000 + 17 * i), dose: 4, visibility }));
const heldOut = Array.from({ length: 6 }, (_, i) => ({ id: `h00${i}`, code: String(5000 + 31 * i) }));

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-verdicts-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function grid(): FixtureRun[] {
  return ['visible', 'redacted'].flatMap((visibility) =>
    [0, 1, 2].map((seed) => ({ cell: { visibility, dose: 4, seed }, canaries: canaries(visibility), heldOut })),
  );
}

describe('verdicts of the declared comparisons', () => {
  it('decides a clear effect, says which comparisons stay undecided, adjusts the family and reads the grid margin', async () => {
    // Redacted canaries rank near the top in every run; visible ones sit with the held-out canaries,
    // whose ranks spread over runs and canaries.
    const a = await buildFixtureAudit(join(root, 'clear'), {
      name: 'clear',
      runs: grid(),
      outcome: (c) => {
        const k = Number(c.canary.id.slice(-1));
        if (c.canary.inserted && c.run.cell.visibility === 'redacted') return { rank: 1 + k + 3 * c.runIndex };
        return { rank: 600 + 500 * k + 400 * (c.runIndex % 3) };
      },
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 300 });
    const v = summary.verdicts ?? [];
    expect(v.map((x) => x.kind)).toEqual(['control', 'control', 'paired']);
    expect(v.every((x) => x.family_size === 3 && x.margin_bits === 1 && x.adjustment === 'holm')).toBe(true);
    const redacted = v.find((x) => x.comparison.startsWith('visibility=redacted'));
    expect(redacted?.unadjusted.verdict).toBe('higher');
    expect(redacted?.adjusted.verdict).toBe('higher');
    expect(redacted?.sentence).toMatch(
      /^Redacted training at dose 4 raised exposure above the held-out control: \+\d+\.\d\d \[\+\d+\.\d\d, \+\d+\.\d\d\] bits, decided; the same after Holm over 3 comparisons; 3 runs × 8 canaries\.$/,
    );
    // The adjusted p is never below the unadjusted one.
    for (const x of v) expect(x.adjusted.p_difference).toBeGreaterThanOrEqual(x.unadjusted.p_difference);
    const paired = v.find((x) => x.kind === 'paired');
    expect(paired?.unadjusted.verdict).toBe('higher');
    expect(paired?.sentence).toMatch(/^Visibility visible → redacted raised exposure: \+/);
    expect(paired?.sentence).toContain('3 run pairs × 8 canaries, paired');

    // The same audit with a wide margin declared in its grid: the visible arm is now within it.
    await writeFile(join(a.auditDir, 'grid.yaml'), 'analysis:\n  margin_bits: 6\n');
    const wide = await computeReport({ auditDir: a.auditDir, resamples: 300 });
    const visible = (wide.summary.verdicts ?? []).find((x) => x.comparison.startsWith('visibility=visible'));
    expect(visible?.margin_bits).toBe(6);
    expect(visible?.unadjusted.verdict).toBe('equivalent');
    expect(visible?.sentence).toMatch(
      /^Visible training at dose 4 left exposure within ±6\.00 bits of the held-out control: .*decided: equivalent within ±6\.00 bits/,
    );
    // `report --margin` overrides the grid's.
    const narrow = await computeReport({ auditDir: a.auditDir, resamples: 300, marginBits: 0.01 });
    expect(
      (narrow.summary.verdicts ?? []).every((x) => x.margin_bits === 0.01 && x.unadjusted.verdict !== 'equivalent'),
    ).toBe(true);
  });

  it('compares doses only within one cell: a low dose with no high-dose twin is not set against another cell', async () => {
    // Dose 2 sits only under uniform placement, dose 8 only under early placement (the directions grid's layout).
    const withDose = (dose: number, placement: string) =>
      [0, 1, 2].map((seed) => ({
        cell: { visibility: 'redacted', dose, placement, seed },
        canaries: canaries('redacted').map((c) => ({ ...c, dose })),
        heldOut,
      }));
    const a = await buildFixtureAudit(join(root, 'no-twin'), {
      name: 'no-twin',
      runs: [...withDose(8, 'early'), ...withDose(2, 'uniform')],
      outcome: (c) => ({ rank: 1 + Number(c.canary.id.slice(-1)) * (c.canary.inserted ? 40 : 900) + 7 * c.runIndex }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 200 });
    const v = summary.verdicts ?? [];
    expect(v.map((x) => x.kind)).toEqual(['control']);
    expect(v[0]?.comparison).toContain('placement=early');
    // With dose 2 under early placement too, the dose comparison is early 2 → early 8.
    const b = await buildFixtureAudit(join(root, 'twin'), {
      name: 'twin',
      runs: [...withDose(8, 'early'), ...withDose(2, 'uniform'), ...withDose(2, 'early')],
      outcome: (c) => ({ rank: 1 + Number(c.canary.id.slice(-1)) * (c.canary.inserted ? 40 : 900) + 7 * c.runIndex }),
    });
    const twin = (await computeReport({ auditDir: b.auditDir, resamples: 200 })).summary.verdicts ?? [];
    const dose = twin.filter((x) => x.kind === 'dose');
    expect(dose).toHaveLength(1);
    expect(dose[0]?.comparison).toMatch(/placement=early.*dose 8 − dose 2/);
  });

  it('with one run per arm: no run-to-run variance to plan with, and says so', async () => {
    const runs = grid().filter((r) => r.cell.seed === 0);
    const a = await buildFixtureAudit(join(root, 'single'), {
      name: 'single',
      runs,
      outcome: (c) => ({ rank: 1 + ((Number(c.canary.id.slice(-1)) * 2593 + (c.canary.inserted ? 0 : 977)) % 9000) }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 300 });
    const v = summary.verdicts ?? [];
    expect(v.length).toBeGreaterThan(0);
    expect(v.every((x) => x.one_run && x.df === null && x.power === null)).toBe(true);
    const undecided = v.filter((x) => x.unadjusted.verdict === 'undecided');
    expect(undecided.length).toBeGreaterThan(0);
    for (const x of undecided)
      expect(x.sentence).toMatch(
        /undecided; .*one run per arm: a rerun can fall outside this interval \(add seeds to learn how many runs would decide it\)\.$/,
      );
  });

  it('says how many more runs would decide an undecided comparison', async () => {
    // Run-to-run variation dominates: one run of three copies every redacted canary, two do not.
    const a = await buildFixtureAudit(join(root, 'noisy'), {
      name: 'noisy',
      runs: grid(),
      outcome: (c) => {
        const k = Number(c.canary.id.slice(-1));
        if (c.canary.inserted && c.run.cell.visibility === 'redacted')
          return { rank: ([1, 40, 3][c.runIndex % 3] as number) * (1 + k) };
        return { rank: 300 + 600 * k + 900 * (c.runIndex % 3) };
      },
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 300 });
    const undecided = (summary.verdicts ?? []).filter((x) => x.unadjusted.verdict === 'undecided');
    expect(undecided.length).toBeGreaterThan(0);
    for (const x of undecided) {
      expect(x.power).not.toBeNull();
      expect(x.power?.probability).toBeLessThan(0.8);
      if (x.power?.more_runs !== null) {
        expect(x.power?.more_runs).toBeGreaterThan(0);
        expect(x.sentence).toMatch(/undecided, ≈\d+ more runs?( per arm)? \(\d+ in all\) would decide \(80%\)/);
      }
    }
  });
});

describe('power hints', () => {
  const at = { runs: 3, canaries: 16 };
  const power = { probability: 0.3, runs: null, canaries: null, more_runs: null, both: null };
  it('more runs: the runs to add and the total, canaries left out (unchanged)', () => {
    expect(powerHint({ ...power, runs: 7, more_runs: 4 }, at, 'control')).toBe(
      '≈4 more runs (7 in all) would decide (80%)',
    );
    expect(powerHint({ ...power, runs: 4, more_runs: 1 }, at, 'paired')).toBe(
      '≈1 more run per arm (4 in all) would decide (80%)',
    );
  });
  it("more canaries: the per-run count beside the design's, no more runs", () => {
    expect(powerHint({ ...power, canaries: 40 }, at, 'control')).toBe(
      '≈40 focal canaries per run (the design has 16), with no more runs, would decide (80%)',
    );
  });
  it('both: runs and canaries, when neither alone reaches 80%', () => {
    expect(powerHint({ ...power, both: { runs: 7, canaries: 723 } }, at, 'dose')).toBe(
      '≈4 more runs per arm (7 in all) and 723 focal canaries per run (the design has 16) would decide (80%); neither alone would',
    );
    // The canary count is left out when it is the design's own.
    expect(powerHint({ ...power, both: { runs: 7, canaries: 16 } }, at, 'control')).toBe(
      '≈4 more runs (7 in all) would decide (80%); neither alone would',
    );
  });
  it('neither within 64× the runs and the canaries', () => {
    expect(powerHint(power, at, 'control')).toBe(
      'not decidable at this effect within 192 runs and 1024 focal canaries per run (64× each)',
    );
    expect(powerHint(power, at, 'paired')).toBe(
      'not decidable at this effect within 192 runs per arm and 1024 focal canaries per run (64× each)',
    );
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  lookRuns,
  nextArms,
  onRunArms,
  progressOf,
  runLooks,
  togetherArms,
  type LookDriver,
} from '../../src/app/sequential-audit.js';
import { readAuditIndex, readSequentialRecord } from '../../src/contracts/index.js';
import { auditIndexPath } from '../../src/layout.js';
import { sequentialStatus } from '../../src/cli/views/status-format.js';
import type { SequentialProgress, SubmitAuditInput } from '../../src/queue/index.js';
import { armKey, computeReport } from '../../src/report/index.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-sequential-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const SEEDS = [0, 1, 2, 3];
const canaries = (visibility: string, dose: number) =>
  Array.from({ length: 6 }, (_, i) => ({ id: `f00${i}`, code: String(1000 + 17 * i), dose, visibility }));
const heldOut = Array.from({ length: 6 }, (_, i) => ({ id: `h00${i}`, code: String(5000 + 31 * i) }));

/**
 * Two cells that differ in two axes (no paired comparison between them), so the declared family is
 * two control comparisons on disjoint arms: redacted at dose 4, whose canaries rank near the top in
 * every run (decided at the first look), and visible at dose 1, whose canaries rank near the top in
 * every other run and below the held-out ones in the others (undecided to the last look).
 */
function grid(): FixtureRun[] {
  return [
    ...SEEDS.map((seed) => ({
      cell: { visibility: 'visible', dose: 1, seed },
      canaries: canaries('visible', 1),
      heldOut,
    })),
    ...SEEDS.map((seed) => ({
      cell: { visibility: 'redacted', dose: 4, seed },
      canaries: canaries('redacted', 4),
      heldOut,
    })),
  ];
}

describe('sequential replicates: the looks', () => {
  it('takes the first seeds, stops the decided comparison and adds seeds only to the undecided one', async () => {
    const a = await buildFixtureAudit(join(root, 'looks'), {
      name: 'looks',
      axes: { visibility: ['visible', 'redacted'], dose: [1, 4], seed: SEEDS },
      runs: grid(),
      outcome: (c) => {
        const k = Number(c.canary.id.slice(-1));
        if (!c.canary.inserted) return { rank: 1500 + 400 * k };
        if (c.run.cell.visibility === 'redacted') return { rank: 2 + k };
        // Visible: every other run ranks its canaries near the top, the others below the held-out ones.
        return { rank: c.runIndex % 2 === 0 ? 20 + 7 * k : 4000 + 300 * k };
      },
    });
    const input: SubmitAuditInput = {
      auditId: a.auditId,
      name: 'looks',
      auditDir: a.auditDir,
      runs: a.runs.map((r) => ({ runId: r.runId, cellId: r.runId, manifestPath: join(r.dir, 'manifest.json') })),
    };
    const queued: { runs: string[]; progress: SequentialProgress }[] = [];
    const lines: string[] = [];
    const driver: LookDriver = {
      queue: async (runs, progress) => {
        queued.push({ runs: runs.map((r) => r.runId), progress });
      },
      wait: async () => true,
      say: (line) => lines.push(line),
      resamples: 300,
    };
    const record = await runLooks(a.auditDir, input, { min: 2, max: 4, spending: 'pocock' }, driver);

    const idOf = (visibility: string, seed: number) =>
      (a.runs.find((r) => r.spec.cell.visibility === visibility && r.spec.cell.seed === seed) as { runId: string })
        .runId;
    expect(lines).toEqual([
      'look 1: seed 2 of ≤4 — 1 comparison undecided, 1 decided (stopped)',
      'look 2: seed 3 of ≤4 — 1 comparison undecided, 1 decided (stopped)',
      'look 3: seed 4 of ≤4 — 0 comparisons undecided, 1 decided (stopped)',
    ]);
    // Redacted ran seeds 0-1 only; visible all four, one seed per look after the first.
    expect([...record.taken].sort()).toEqual(
      [
        idOf('visible', 0),
        idOf('visible', 1),
        idOf('redacted', 0),
        idOf('redacted', 1),
        idOf('visible', 2),
        idOf('visible', 3),
      ].sort(),
    );
    expect(queued.map((q) => q.runs.length)).toEqual([4, 5, 6, 6]);
    expect(sequentialStatus(queued[1]?.progress as SequentialProgress)).toBe('seed 3 of ≤4: 1 comparison undecided');
    expect(sequentialStatus(queued[3]?.progress as SequentialProgress)).toBe(
      'seed 4 of ≤4: done, 1 decided, 1 comparison undecided',
    );
    expect(record.done).toBe(true);
    expect(record.stopped.map((s) => [s.comparison.split(',')[0], s.reason, s.look, s.verdict])).toEqual([
      ['visibility=redacted', 'decided', 1, 'higher'],
      ['visibility=visible', 'max', 3, 'undecided'],
    ]);
    expect(record.stopped[0]?.alpha).toBeCloseTo(record.schedule[0]?.alpha as number, 12);
    expect(await readSequentialRecord(a.auditDir)).toEqual(record);

    // The report reads the taken runs only, and its verdicts are the stopping looks' readings.
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 300 });
    expect(summary.counts.runs).toBe(6);
    expect(summary.sequential?.comparisons.map((c) => c.reason)).toEqual(['decided', 'max']);
    const redacted = summary.verdicts?.find((v) => v.comparison.startsWith('visibility=redacted'));
    expect(redacted?.alpha).toBeCloseTo(record.schedule[0]?.alpha as number, 12);
    expect(redacted?.n_runs).toBe(2);
    expect(redacted?.sentence).toMatch(/decided.*; sequential: look 1 of 3, 2 seeds, α 0\.0310 spent at this look\.$/);
    const visible = summary.verdicts?.find((v) => v.comparison.startsWith('visibility=visible'));
    expect(visible?.n_runs).toBe(4);
    expect(visible?.alpha).toBeCloseTo(record.schedule[2]?.alpha as number, 12);

    // Running the looks again reads nothing new: the record is done.
    const again = await runLooks(a.auditDir, input, { min: 2, max: 4, spending: 'pocock' }, driver);
    expect(again).toEqual(record);
  });
});

/**
 * Designs together: two merged cells (`design: codes+rare-tokens`), visible at dose 1 and redacted
 * at dose 4 (no paired or dose comparison between them), eight inserted and eight held-out canaries
 * per run, even ids codes and odd ids rare-tokens. Redacted: every canary near the top in every run,
 * rare-tokens at ranks 2–3 and codes lower by a steady ~4 bits, so its controls and the design
 * comparison are decided at the first look. Visible: codes near the top in every run (decided),
 * rare-tokens near the top in every other run and below the held-out ones in the others (undecided
 * to the last look).
 */
const togetherDesign = (id: string): string => (Number(id.slice(-1)) % 2 === 0 ? 'codes' : 'rare-tokens');
function togetherGrid(): FixtureRun[] {
  const cell = (visibility: string, dose: number) =>
    SEEDS.map((seed) => ({
      cell: { visibility, dose, design: 'codes+rare-tokens', seed },
      canaries: Array.from({ length: 8 }, (_, i) => ({
        id: `f00${i}`,
        code: String(1000 + 17 * i),
        dose,
        visibility,
        design: togetherDesign(`f00${i}`),
      })),
      heldOut: Array.from({ length: 8 }, (_, i) => ({
        id: `h00${i}`,
        code: String(5000 + 31 * i),
        design: togetherDesign(`h00${i}`),
      })),
    }));
  return [...cell('visible', 1), ...cell('redacted', 4)];
}

describe('sequential replicates with designs together', () => {
  it('adds a seed to a merged cell while one of its designs’ comparisons is undecided, and stops it when all are decided', async () => {
    const a = await buildFixtureAudit(join(root, 'together'), {
      name: 'together',
      axes: { visibility: ['visible', 'redacted'], dose: [1, 4], design: ['codes+rare-tokens'], seed: SEEDS },
      runs: togetherGrid(),
      outcome: (c) => {
        const k = Number(c.canary.id.slice(-1));
        if (!c.canary.inserted) return { rank: 1500 + 400 * k };
        const rare = togetherDesign(c.canary.id) === 'rare-tokens';
        if (c.run.cell.visibility === 'redacted')
          return { rank: rare ? 2 + (k > 4 ? 1 : 0) : 32 + 16 * k + (c.runIndex % 2) };
        if (!rare) return { rank: 2 + k };
        return { rank: c.runIndex % 2 === 0 ? 20 + 7 * k : 4000 + 300 * k };
      },
    });
    const input: SubmitAuditInput = {
      auditId: a.auditId,
      name: 'together',
      auditDir: a.auditDir,
      runs: a.runs.map((r) => ({ runId: r.runId, cellId: r.runId, manifestPath: join(r.dir, 'manifest.json') })),
    };
    const lines: string[] = [];
    const driver: LookDriver = {
      queue: async () => {},
      wait: async () => true,
      say: (line) => lines.push(line),
      resamples: 300,
    };
    const record = await runLooks(a.auditDir, input, { min: 2, max: 4, spending: 'pocock' }, driver);
    const idOf = (visibility: string, seed: number) =>
      (a.runs.find((r) => r.spec.cell.visibility === visibility && r.spec.cell.seed === seed) as { runId: string })
        .runId;
    // Every design's comparisons are read: both designs' controls in both cells, the designs compared
    // at the highest dose (redacted).
    const stopped = record.stopped.map((s) => [s.comparison, s.reason, s.look, s.verdict]);
    expect(stopped).toEqual([
      ['design=codes, visibility=redacted, hidden probes: inserted − held-out control', 'decided', 1, 'higher'],
      ['design=rare-tokens, visibility=redacted, hidden probes: inserted − held-out control', 'decided', 1, 'higher'],
      ['design=codes, visibility=visible, hidden probes: inserted − held-out control', 'decided', 1, 'higher'],
      [
        'visibility=redacted, dose 4, hidden probes: design rare-tokens − codes, paired within runs',
        'decided',
        1,
        'higher',
      ],
      ['design=rare-tokens, visibility=visible, hidden probes: inserted − held-out control', 'max', 3, 'undecided'],
    ]);
    // The redacted cell stopped at its first look's two seeds; the visible one ran all four, for its
    // rare-tokens comparison alone.
    expect([...record.taken].sort()).toEqual(
      [
        idOf('visible', 0),
        idOf('visible', 1),
        idOf('redacted', 0),
        idOf('redacted', 1),
        idOf('visible', 2),
        idOf('visible', 3),
      ].sort(),
    );
    expect(lines).toEqual([
      'look 1: seed 2 of ≤4 — 1 comparison undecided, 4 decided (stopped)',
      'look 2: seed 3 of ≤4 — 1 comparison undecided, 4 decided (stopped)',
      'look 3: seed 4 of ≤4 — 0 comparisons undecided, 4 decided (stopped)',
    ]);
    // The readings name the merged cells' arms, the ones runs have.
    const index = await readAuditIndex(auditIndexPath(a.auditDir));
    const merged = (visibility: string, dose: number) =>
      armKey(index.runs.find((e) => e.cell.visibility === visibility && e.cell.dose === dose)?.cell ?? {});
    expect(record.stopped.map((s) => s.arms)).toEqual([
      [merged('redacted', 4)],
      [merged('redacted', 4)],
      [merged('visible', 1)],
      [merged('redacted', 4)],
      [merged('visible', 1)],
    ]);
  });

  it('maps each design’s arm to the arm of the runs holding it, and leaves other arms as they are', () => {
    const entries = [
      { run_id: 'r0', cell: { visibility: 'redacted', design: 'codes+rare-tokens', seed: 0 } },
      { run_id: 'r1', cell: { visibility: 'redacted', design: 'codes+rare-tokens', seed: 1 } },
      { run_id: 's0', cell: { visibility: 'visible', design: 'codes', seed: 0 } },
    ];
    const map = togetherArms(entries, [
      { run_id: 'r0', design: 'codes' },
      { run_id: 'r0', design: 'rare-tokens' },
      { run_id: 'r1', design: 'codes' },
      { run_id: 's0' },
    ]);
    const merged = armKey({ visibility: 'redacted', design: 'codes+rare-tokens' });
    expect([...map.entries()]).toEqual([
      [armKey({ visibility: 'redacted', design: 'codes' }), merged],
      [armKey({ visibility: 'redacted', design: 'rare-tokens' }), merged],
    ]);
    const visible = armKey({ visibility: 'visible', design: 'codes' });
    const family = [
      { comparison: 'A', arms: [armKey({ visibility: 'redacted', design: 'rare-tokens' }), visible] },
      {
        comparison: 'B',
        arms: [
          armKey({ visibility: 'redacted', design: 'rare-tokens' }),
          armKey({ visibility: 'redacted', design: 'codes' }),
        ],
      },
    ];
    expect(onRunArms(family, map)).toEqual([
      { comparison: 'A', arms: [merged, visible] },
      { comparison: 'B', arms: [merged] },
    ]);
  });
});

describe('which runs a look takes', () => {
  const entries = [0, 1, 2].flatMap((seed) =>
    ['a', 'b', 'c'].map((v) => ({ run_id: `${v}${seed}`, cell: { visibility: v, dose: 1, seed } })),
  );
  const arm = (v: string) => armKey({ visibility: v, dose: 1 });

  it('the first seeds of every arm, then the next seed of the arms asked for, keeping what was taken', () => {
    const first = lookRuns(entries, [0, 1, 2], 2, null, []);
    expect(first).toEqual(['a0', 'b0', 'c0', 'a1', 'b1', 'c1']);
    expect(lookRuns(entries, [0, 1, 2], 3, new Set([arm('b')]), first)).toEqual([...first, 'b2']);
    // The seed axis's order, not the values, decides which seeds come first.
    expect(lookRuns(entries, [2, 0, 1], 1, null, [])).toEqual(['a2', 'b2', 'c2']);
  });

  it('open comparisons keep their arms, and arms no comparison names, going', () => {
    const family = [
      { comparison: 'A', arms: [arm('a')] },
      { comparison: 'B', arms: [arm('b')] },
    ];
    expect([...nextArms(['B'], family, [arm('a'), arm('b'), arm('c')])].sort()).toEqual([arm('b'), arm('c')].sort());
    expect(nextArms([], family, [arm('a'), arm('b'), arm('c')]).size).toBe(0);
  });

  it('says where the looks stand before the first one is read', () => {
    const p = progressOf(
      {
        schema_version: 'canary-audit.sequential/1',
        min: 3,
        max: 10,
        spending: 'pocock',
        alpha: 0.05,
        seeds: [],
        schedule: [{ look: 1, seeds: 3, fraction: 0.3, spent: 0.02, alpha: 0.02 }],
        taken: [],
        pending_look: 1,
        looks: [],
        stopped: [],
        done: false,
      },
      null,
    );
    expect(sequentialStatus(p)).toBe('seed 3 of ≤10: first look');
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { studentTQuantile } from '../../src/metrics/distributions.js';
import { buildDocument } from '../../src/report/document.js';
import { pairedDesignDifference } from '../../src/report/canary-designs.js';
import { computeReport, type ComputedReport } from '../../src/report/index.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

/**
 * Two designs together in three runs (seeds): eight inserted and eight held-out canaries per
 * run, even ids codes, odd ids rare-tokens (as `canaries.designs: together` splits them). The
 * rare-token secrets rank first everywhere; codes canary j ranks 1 + 3j + (the run's index);
 * held-out canaries rank 60 + 3j + the run's index (100 candidates each).
 */
const design = (j: number): string => (j % 2 === 0 ? 'codes' : 'rare-tokens');
let root: string;
let report: ComputedReport;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'designs-together-'));
  const runs: FixtureRun[] = [0, 1, 2].map((seed) => ({
    cell: { visibility: 'redacted', dose: 16, design: 'codes+rare-tokens', seed },
    canaries: Array.from({ length: 8 }, (_, j) => ({
      id: `f00${j}`,
      code: String(1000 + j),
      dose: 16,
      design: design(j),
    })),
    heldOut: Array.from({ length: 8 }, (_, j) => ({ id: `h00${j}`, code: String(2000 + j), design: design(j) })),
    phases: ['base', 'final'],
    randomizedInclusion: true,
    space: { kind: 'sampled', decoys: 99 },
  }));
  const a = await buildFixtureAudit(join(root, 'together'), {
    name: 'together',
    runs,
    outcome: (c) => {
      const j = Number(c.canary.id.slice(1));
      if (c.phase === 'base') return { rank: 50 + j };
      if (!c.canary.inserted) return { rank: 60 + 3 * j + c.runIndex };
      return { rank: design(j) === 'codes' ? 1 + 3 * j + c.runIndex : 1 };
    },
  });
  report = await computeReport({ auditDir: a.auditDir, resamples: 50 });
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe('designs together in one run', () => {
  it('splits each run’s canaries by their design: one row per design over the same three runs', () => {
    const d = report.summary.canary_designs;
    expect(d?.together).toBe(true);
    expect(d?.designs).toEqual(['codes', 'rare-tokens']);
    expect(
      d?.rows.map((r) => [r.design, r.n_runs, r.n_canaries, r.membership[0]?.n_in, r.membership[0]?.n_out]),
    ).toEqual([
      ['codes', 3, 4, 12, 12],
      ['rare-tokens', 3, 4, 12, 12],
    ]);
    const [codes, rare] = d?.rows ?? [];
    expect(rare?.exposure?.estimate).toBeCloseTo(Math.log2(100), 9);
    expect(codes?.run_medians.map((r) => r.run_id)).toEqual(rare?.run_medians.map((r) => r.run_id));
    // Each design's held-out control is its own held-out canaries (codes: h000, h002, …).
    const ceiling = Math.log2(100);
    const heldCodes = [0, 2, 4, 6].flatMap((j) => [0, 1, 2].map((r) => ceiling - Math.log2(60 + 3 * j + r)));
    expect(codes?.held_out?.estimate).toBeCloseTo(
      heldCodes
        .sort((a, b) => a - b)
        .slice(5, 7)
        .reduce((a, b) => a + b) / 2,
      9,
    );
  });

  it('compares the designs paired within runs, with the known per-run differences', () => {
    const v = report.summary.verdicts?.filter((x) => x.kind === 'design') ?? [];
    expect(v).toHaveLength(1);
    expect(v[0]?.comparison).toBe('dose 16, hidden probes: design rare-tokens − codes, paired within runs');
    // Run r: rare-tokens at the ceiling, codes' median the mean of its 2nd and 3rd exposures (ranks 7 + r and 13 + r).
    const diffs = [0, 1, 2].map((r) => (Math.log2(7 + r) + Math.log2(13 + r)) / 2);
    const mean = diffs.reduce((a, b) => a + b) / 3;
    expect(v[0]?.estimate).toBeCloseTo(mean, 9);
    expect(v[0]?.df).toBe(2);
    expect(v[0]?.n_runs).toBe(3);
    expect(v[0]?.one_run).toBe(false);
    const md = renderMarkdown(buildDocument(report.summary));
    expect(md).toContain('The designs were together');
  });

  it('pairs per-run medians: Student’s t over the shared runs, null under two', () => {
    const row = (pairs: [string, number][]) => ({
      run_medians: pairs.map(([run_id, median]) => ({ run_id, median, n: 4 })),
    });
    const base = row([
      ['a', 0],
      ['b', 0],
      ['c', 0],
      ['z', 5],
    ]);
    const p = pairedDesignDifference(
      row([
        ['a', 1],
        ['b', 2],
        ['c', 3],
      ]),
      base,
      0.95,
    );
    const se = 1 / Math.sqrt(3);
    const t = studentTQuantile(0.975, 2);
    expect(p).toMatchObject({ estimate: 2, df: 2, n_runs: 3 });
    expect(p?.se).toBeCloseTo(se, 12);
    expect(p?.lo).toBeCloseTo(2 - t * se, 12);
    expect(p?.hi).toBeCloseTo(2 + t * se, 12);
    expect(p?.components).toMatchObject([{ design: 'nested', canary: 0, residual: 0, runs: 3, canaries: 4 }]);
    expect(p?.components[0]?.run).toBeCloseTo(1 / 3, 12);
    expect(pairedDesignDifference(row([['a', 1]]), base, 0.95)).toBeNull();
  });
});

/**
 * Two designs together at doses 1 and 16 (three seeds each): the same eight canaries in every run,
 * even ids codes, odd ids rare-tokens. At dose 16 canary j ranks 1 + j + the seed; at dose 1
 * a codes canary ranks 8× that and a rare-tokens canary 2×, so every paired dose difference is
 * exactly 3 bits for codes and 1 bit for rare-tokens.
 */
describe('designs together along a dose axis', () => {
  let doses: ComputedReport;
  beforeAll(async () => {
    const runs: FixtureRun[] = [1, 16].flatMap((dose) =>
      [0, 1, 2].map((seed) => ({
        cell: { visibility: 'redacted', dose, design: 'codes+rare-tokens', seed },
        canaries: Array.from({ length: 8 }, (_, j) => ({
          id: `f00${j}`,
          code: String(1000 + j),
          dose,
          design: design(j),
        })),
        heldOut: Array.from({ length: 8 }, (_, j) => ({ id: `h00${j}`, code: String(2000 + j), design: design(j) })),
      })),
    );
    const a = await buildFixtureAudit(join(root, 'together-doses'), {
      name: 'together-doses',
      axes: { dose: [1, 16], seed: [0, 1, 2] },
      runs,
      outcome: (c) => {
        const j = Number(c.canary.id.slice(1));
        if (!c.canary.inserted) return { rank: 3000 + 50 * j + c.runIndex };
        const high = 1 + j + Number(c.run.cell.seed);
        if (c.run.cell.dose === 16) return { rank: high };
        return { rank: (design(j) === 'codes' ? 8 : 2) * high };
      },
    });
    doses = await computeReport({ auditDir: a.auditDir, resamples: 50 });
  });

  it('declares a dose comparison for every design, each over its own canaries', () => {
    const dose = doses.summary.verdicts?.filter((v) => v.kind === 'dose') ?? [];
    expect(dose.map((v) => v.comparison)).toEqual([
      'design=codes, hidden probes: dose 16 − dose 1',
      'design=rare-tokens, hidden probes: dose 16 − dose 1',
    ]);
    expect(dose[0]?.estimate).toBeCloseTo(3, 9);
    expect(dose[1]?.estimate).toBeCloseTo(1, 9);
    expect(dose.map((v) => [v.n_runs, v.n_canaries])).toEqual([
      [3, 4],
      [3, 4],
    ]);
    // Every design keeps its control at the highest dose, and the designs are compared there.
    expect(doses.summary.verdicts?.map((v) => v.kind).sort()).toEqual(['control', 'control', 'design', 'dose', 'dose']);
  });
});

/**
 * Two designs together, visible and redacted at dose 16 (three seeds each), the same eight canaries
 * in every run. Redacted canary j ranks 1 + j + the seed; visible, 4× that for codes and 2× for
 * rare-tokens: paired visibility differences of exactly 2 bits (codes) and 1 bit (rare-tokens).
 */
describe('designs together along a paired axis', () => {
  let pairedReport: ComputedReport;
  beforeAll(async () => {
    const runs: FixtureRun[] = ['visible', 'redacted'].flatMap((visibility) =>
      [0, 1, 2].map((seed) => ({
        cell: { visibility, dose: 16, design: 'codes+rare-tokens', seed },
        canaries: Array.from({ length: 8 }, (_, j) => ({
          id: `f00${j}`,
          code: String(1000 + j),
          dose: 16,
          visibility,
          design: design(j),
        })),
        heldOut: Array.from({ length: 8 }, (_, j) => ({ id: `h00${j}`, code: String(2000 + j), design: design(j) })),
      })),
    );
    const a = await buildFixtureAudit(join(root, 'together-visibility'), {
      name: 'together-visibility',
      axes: { visibility: ['visible', 'redacted'], seed: [0, 1, 2] },
      runs,
      outcome: (c) => {
        const j = Number(c.canary.id.slice(1));
        if (!c.canary.inserted) return { rank: 3000 + 50 * j + c.runIndex };
        const redacted = 1 + j + Number(c.run.cell.seed);
        if (c.run.cell.visibility === 'redacted') return { rank: redacted };
        return { rank: (design(j) === 'codes' ? 4 : 2) * redacted };
      },
    });
    pairedReport = await computeReport({ auditDir: a.auditDir, resamples: 50 });
  });

  it('declares the paired comparison for every design, each over its own canaries', () => {
    const paired = pairedReport.summary.verdicts?.filter((v) => v.kind === 'paired') ?? [];
    expect(paired.map((v) => v.comparison.replace(/visibility \S+ − [^,]+/, 'visibility'))).toEqual([
      'design=codes, hidden probes: visibility, paired',
      'design=rare-tokens, hidden probes: visibility, paired',
    ]);
    // The sign follows the axis's order; the size is each design's own.
    expect(paired.map((v) => Math.abs(v.estimate))).toEqual([expect.closeTo(2, 9), expect.closeTo(1, 9)]);
    expect(paired.map((v) => v.n_canaries)).toEqual([4, 4]);
  });
});

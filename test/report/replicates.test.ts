import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { singleRunComparisons } from '../../src/grid/replicates.js';
import { computeReport } from '../../src/report/index.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import { buildDocument } from '../../src/report/document.js';
import type { Numerics } from '../../src/contracts/result.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

const NUMERICS: Numerics = {
  cpu_model: 'Fixture CPU',
  cpu_capability: 'AVX512',
  threads: 1,
  interop_threads: 1,
  device: 'cpu',
  gpu_model: null,
  gpu_count: 0,
  driver_version: null,
  cuda_version: null,
  cudnn_version: null,
  dtype: 'float32',
  deterministic_algorithms: false,
  cudnn_deterministic: false,
  cudnn_benchmark: false,
};

const canaries = Array.from({ length: 6 }, (_, i) => ({
  id: `f00${i}`,
  code: String(1000 + 17 * i),
  dose: 4,
  visibility: 'redacted' as const,
}));
const heldOut = Array.from({ length: 4 }, (_, i) => ({ id: `h00${i}`, code: String(5000 + 31 * i) }));

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-replicates-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('single runs and run-to-run spread', () => {
  it('flags every comparison with one run per arm, in the warnings and beside each interval', async () => {
    const runs: FixtureRun[] = ['early', 'late'].map((placement, r) => ({
      cell: { placement, dose: 4, visibility: 'redacted', seed: 0 },
      canaries,
      heldOut,
      numerics: r === 0 ? NUMERICS : { ...NUMERICS, cpu_capability: 'AVX2' },
    }));
    const a = await buildFixtureAudit(join(root, 'one'), {
      name: 'one-run',
      runs,
      outcome: (c) => ({ rank: c.canary.inserted ? 3 + c.runIndex * 40 + Number(c.canary.id.slice(-1)) : 5000 }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 50 });
    const single = summary.warnings.find((w) => w.kind === 'single_run');
    expect(single?.message).toMatch(/2 focal figure\(s\) and 1 paired comparison\(s\) \(placement early → late/);
    expect(single?.message).toContain('one run: a rerun can fall outside this interval');
    const md = renderMarkdown(buildDocument(summary));
    expect(md).toMatch(/single run: canaries only; one run: a rerun can fall outside this interval/);
    expect(md).toMatch(/single run pair: canary pairs only; one run: a rerun can fall outside this interval/);
    // Two floating-point paths among the compared runs: named, and warned.
    const mixed = summary.warnings.find((w) => w.kind === 'mixed_numerics');
    expect(mixed?.message).toContain('capability AVX512');
    expect(mixed?.message).toContain('capability AVX2');
    expect(summary.numerics?.map((n) => n.cpu_capability).sort()).toEqual(['AVX2', 'AVX512']);
    expect(summary.runs.map((r) => r.numerics?.cpu_capability)).toEqual(['AVX512', 'AVX2']);
    expect(md).toMatch(/Numerics \(1 run\): Fixture CPU, capability AVX2, 1 thread, cpu, float32/);
  });

  it('shows each run’s median where a cell has several runs, and no single-run flag there', async () => {
    const runs: FixtureRun[] = [0, 1, 2].map((seed) => ({
      cell: { placement: 'late', dose: 4, visibility: 'redacted', seed },
      canaries,
      heldOut,
      numerics: NUMERICS,
    }));
    const a = await buildFixtureAudit(join(root, 'three'), {
      name: 'three-runs',
      runs,
      outcome: (c) => ({ rank: c.canary.inserted ? 1 + c.runIndex * 100 : 5000 }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 60 });
    const g = summary.groups.find((x) => x.cohort === 'focal' && x.phase === 'final');
    expect(g?.inserted.run_medians.map((r) => r.n)).toEqual([6, 6, 6]);
    // Ranks 1, 101, 201 for every canary of runs 0, 1, 2: one median per run.
    expect(g?.inserted.run_medians.map((r) => r.median.toFixed(4))).toEqual(
      [Math.log2(10000), Math.log2(10000 / 101), Math.log2(10000 / 201)].map((x) => x.toFixed(4)),
    );
    expect(g?.inserted.exposure?.resampling).toBe('crossed');
    expect(summary.warnings.map((w) => w.kind)).not.toContain('single_run');
    expect(summary.warnings.map((w) => w.kind)).not.toContain('mixed_numerics');
    const md = renderMarkdown(buildDocument(summary));
    expect(md).toContain('| Per-run medians |');
    expect(md).toContain('13.29, 6.63, 5.64');
  });

  it('gives a copy rate pooling runs an interval that respects them, with each run’s count; one run keeps Wilson', async () => {
    const sixteen = Array.from({ length: 16 }, (_, i) => ({
      id: `f${String(i).padStart(3, '0')}`,
      code: String(2000 + 37 * i),
      dose: 4,
      visibility: 'visible' as const,
    }));
    const runs: FixtureRun[] = [0, 1, 2].map((seed) => ({
      cell: { dose: 4, visibility: 'visible', seed },
      canaries: sixteen,
      heldOut,
      kinds: ['hidden', 'substituted'],
    }));
    // Run 0 copies the shown code for all 16 canaries, runs 1 and 2 for none.
    const outcome = (c: { runIndex: number; kind: string; shown: string | null; canary: { inserted: boolean } }) => ({
      rank: 7,
      ...(c.kind === 'substituted' && c.runIndex === 0 && c.canary.inserted ? { greedy: c.shown } : {}),
    });
    const a = await buildFixtureAudit(join(root, 'copy'), { name: 'copy', runs, outcome });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 40 });
    const g = summary.groups.find((x) => x.cohort === 'focal' && x.phase === 'final' && x.probe_kind === 'substituted');
    const copied = g?.inserted.copy?.prefill;
    expect(copied).toMatchObject({ k: 16, n: 48, n_runs: 3, method: 'design-wilson', resampling: 'crossed', df: 2 });
    expect(copied?.runs.map((r) => [r.k, r.n])).toEqual([
      [16, 16],
      [0, 16],
      [0, 16],
    ]);
    expect(copied?.lo).toBeCloseTo(0.011329923, 6);
    expect(copied?.hi).toBeCloseTo(0.956170077, 6);
    // The held-out canaries copied in no run: every run agrees at 0, each run one trial.
    expect(g?.controls.held_out?.copy?.prefill).toMatchObject({ k: 0, n: 12, n_eff: 3, method: 'runs-exact' });
    const md = renderMarkdown(buildDocument(summary));
    expect(md).toContain('| Copied per run |');
    expect(md).toContain('16/48 (0.33) [0.01, 0.96] (design-Wilson, crossed runs × canaries: n_eff 2.0, t(2.0))');
    expect(md).toContain('16/16, 0/16, 0/16');

    const one = await buildFixtureAudit(join(root, 'copy-one'), { name: 'copy-one', runs: runs.slice(0, 1), outcome });
    const single = (await computeReport({ auditDir: one.auditDir, resamples: 40 })).summary.groups.find(
      (x) => x.cohort === 'focal' && x.phase === 'final' && x.probe_kind === 'substituted',
    );
    expect(single?.inserted.copy?.prefill).toMatchObject({
      k: 16,
      n: 16,
      rate: 1,
      hi: 1,
      method: 'wilson',
      resampling: 'flat',
      n_runs: 1,
      n_eff: 16,
      df: null,
    });
    expect(single?.inserted.copy?.prefill?.lo).toBeCloseTo(0.806392, 5);
  });

  it('gives membership and ε readouts for a randomized-inclusion run, and refuses the one-run bound otherwise', async () => {
    const pool = Array.from({ length: 32 }, (_, i) => ({
      id: `c${String(i).padStart(3, '0')}`,
      code: String(1000 + 37 * i),
      dose: 4,
      visibility: 'redacted' as const,
    }));
    const inserted = pool.filter((_, i) => i % 2 === 0);
    const out = pool.filter((_, i) => i % 2 === 1).map(({ id, code }) => ({ id, code }));
    const runs: FixtureRun[] = [
      {
        cell: { placement: 'late', dose: 4, visibility: 'redacted', seed: 0 },
        canaries: inserted,
        heldOut: out,
        randomizedInclusion: true,
      },
      { cell: { placement: 'early', dose: 4, visibility: 'redacted', seed: 0 }, canaries: inserted, heldOut: out },
    ];
    // Inserted canaries rank 1–16, held-out ones 2000+: perfectly separated.
    const a = await buildFixtureAudit(join(root, 'privacy'), {
      name: 'privacy',
      runs,
      outcome: (c) => ({
        rank: c.canary.inserted ? 1 + (Number(c.canary.id.slice(1)) % 16) : 2000 + Number(c.canary.id.slice(1)),
      }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 20 });
    const [randomized, fixed] = [
      summary.privacy?.find((p) => p.inclusion === 'randomized'),
      summary.privacy?.find((p) => p.inclusion === 'fixed'),
    ];
    expect(randomized).toMatchObject({ n_in: 16, n_out: 16, probe_kind: 'hidden', auc: { estimate: 1 } });
    expect(randomized?.tpr_at_fpr.map((t) => [t.fpr, t.k, t.n])).toEqual([
      [0.01, 16, 16],
      [0.001, 16, 16],
    ]);
    expect(randomized?.epsilon.clopper_pearson?.epsilon).toBeGreaterThan(0);
    expect(randomized?.epsilon.one_run).toMatchObject({ m: 32, guesses: 32, correct: 32 });
    expect(randomized?.epsilon.one_run?.epsilon).toBeGreaterThan(0);
    expect(randomized?.epsilon.one_run_refused).toBeNull();
    expect(fixed?.epsilon.one_run).toBeNull();
    expect(fixed?.epsilon.one_run_refused).toMatch(/inclusion was not randomized/);
    // GDP for both runs; the f-DP one-run bound, like the one-run bound, only for the randomized one.
    expect(randomized?.epsilon.gdp?.epsilon).toBeGreaterThan(0);
    expect(fixed?.epsilon.gdp?.epsilon).toBeGreaterThan(0);
    expect(randomized?.epsilon.fdp_one_run).toMatchObject({
      m: 32,
      guesses: 16,
      correct: 16,
      threshold_strategy: 'bonferroni',
    });
    expect(randomized?.epsilon.fdp_one_run?.epsilon).toBeGreaterThan(0);
    expect(fixed?.epsilon.fdp_one_run).toBeNull();
    expect(randomized?.auc_hull).toBe(1);
    const md = renderMarkdown(buildDocument(summary));
    expect(md).toContain('ε ≥ (GDP)');
    expect(md).toContain('its threshold strategy: bonferroni');
    expect(md).toContain('## Privacy readouts');
    expect(md).toContain('refused: inclusion was not randomized');
  });

  it('names the comparisons of a grid that have one run per arm', () => {
    const cell = (visibility: string, dose: number, seed: number) => ({
      labels: { visibility, dose, seed, model: 'tiny' },
    });
    const one = singleRunComparisons([
      cell('visible', 1, 0),
      cell('redacted', 1, 0),
      cell('visible', 4, 0),
      cell('redacted', 4, 0),
    ]);
    expect(one.map((c) => `${c.axis} ${c.from}→${c.to} ${c.context}`).sort()).toEqual([
      'dose 1→4 visibility=redacted',
      'dose 1→4 visibility=visible',
      'visibility visible→redacted dose=1',
      'visibility visible→redacted dose=4',
    ]);
    const three = [0, 1, 2].flatMap((s) => [cell('visible', 1, s), cell('redacted', 1, s)]);
    expect(singleRunComparisons(three)).toEqual([]);
  });
});

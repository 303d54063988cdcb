import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clopperPearsonEpsilon, oneRunBound, type ScoredCanary } from '../../src/metrics/privacy.js';
import { gdpEpsilon } from '../../src/metrics/privacy-gdp.js';
import { fdpOneRunBound } from '../../src/metrics/privacy-fdp.js';
import { buildDocument } from '../../src/report/document.js';
import { computeReport } from '../../src/report/index.js';
import type { LoadedRun } from '../../src/report/load-audit.js';
import { renderHtml } from '../../src/report/html.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import { largestEpsilon, type MembershipPool } from '../../src/report/privacy-max.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

const run = (i: number): LoadedRun => ({
  run_id: `run-${i}`,
  cell_id: `cell=${i}`,
  cell: {},
  dir: '',
  status: 'finished',
  reason: null,
  failure: null,
  manifest: null,
  resultPath: '',
  outputDir: '',
});
/** 32 canaries; the first `separated` members score above every non-member, the rest interleave. */
const scored = (separated: number): ScoredCanary[] =>
  Array.from({ length: 32 }, (_, i) => ({
    member: i % 2 === 0,
    score: i % 2 === 0 && i / 2 < separated ? 100 + i : i % 7,
  }));

describe('largest ε bound over runs, selection-aware', () => {
  const pools: MembershipPool[] = [
    { run: run(0), probe_kind: 'hidden', randomized: true, scored: scored(4) },
    { run: run(1), probe_kind: 'hidden', randomized: true, scored: scored(16) },
    { run: run(2), probe_kind: 'hidden', randomized: false, scored: scored(8) },
  ];

  it('recomputes each run’s bound at 1 − α/k and names the run that gives the largest', () => {
    const [cp, one] = largestEpsilon(pools, 1e-5, 0.95);
    // Clopper–Pearson over all three runs: each at 1 − 0.05/3.
    expect(cp).toMatchObject({
      bound: 'clopper_pearson',
      run_id: 'run-1',
      cell_id: 'cell=1',
      searched: 3,
      confidence: 0.95,
    });
    expect(cp?.confidence_each).toBeCloseTo(1 - 0.05 / 3, 12);
    expect(cp?.epsilon).toBe(clopperPearsonEpsilon(scored(16), 1e-5, 1 - 0.05 / 3)?.epsilon);
    // Selection costs: the corrected largest is below the uncorrected one.
    const naive = Math.max(...pools.map((p) => clopperPearsonEpsilon(p.scored, 1e-5, 0.95)?.epsilon ?? 0));
    expect(cp?.epsilon).toBeGreaterThan(0);
    expect(cp?.epsilon).toBeLessThan(naive);
    // The one-run bound only over the two randomized runs: each at 1 − 0.05/2.
    expect(one).toMatchObject({ bound: 'one_run', run_id: 'run-1', searched: 2 });
    expect(one?.epsilon).toBe(oneRunBound(scored(16), 1e-5, 1 - 0.05 / 2)?.epsilon);
  });

  it('searches the GDP bound over every run and the f-DP one-run bound over the randomized runs', () => {
    const [, , gdp, fdp] = largestEpsilon(pools, 1e-5, 0.95);
    const gdps = pools.map((p) => gdpEpsilon(p.scored, 1e-5, 1 - 0.05 / 3)?.epsilon ?? 0);
    expect(gdp).toMatchObject({ bound: 'gdp', searched: 3, epsilon: Math.max(...gdps) });
    const fdps = pools.slice(0, 2).map((p) => fdpOneRunBound(p.scored, 1e-5, 1 - 0.05 / 2)?.epsilon ?? 0);
    expect(fdp).toMatchObject({ bound: 'fdp_one_run', searched: 2, epsilon: Math.max(...fdps) });
  });

  it('names no run when every bound is 0, and leaves out the one-run bound without randomized runs', () => {
    const flat = [0, 1].map((i) => ({
      run: run(i),
      probe_kind: 'hidden',
      randomized: false,
      scored: scored(0).map((c) => ({ ...c, score: 0 })),
    }));
    const none = {
      epsilon: 0,
      run_id: null,
      cell_id: null,
      searched: 2,
      confidence: 0.95,
      confidence_each: 0.975,
      delta: 1e-5,
    };
    expect(largestEpsilon(flat, 1e-5, 0.95)).toEqual([
      { bound: 'clopper_pearson', ...none },
      { bound: 'gdp', ...none },
    ]);
  });
});

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-privacy-max-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('the report’s ε readout', () => {
  it('says in summary.json and in the text that the largest bound is corrected for the runs searched', async () => {
    const pool = Array.from({ length: 32 }, (_, i) => ({
      id: `c${String(i).padStart(3, '0')}`,
      code: String(1000 + 37 * i),
      dose: 4,
      visibility: 'redacted' as const,
    }));
    const runs: FixtureRun[] = [0, 1].map((seed) => ({
      cell: { dose: 4, visibility: 'redacted', seed },
      canaries: pool.filter((_, i) => i % 2 === 0),
      heldOut: pool.filter((_, i) => i % 2 === 1),
      randomizedInclusion: true,
    }));
    const a = await buildFixtureAudit(join(root, 'max'), {
      name: 'max',
      runs,
      outcome: (c) => ({
        rank: c.canary.inserted
          ? 1 + c.runIndex * 50 + (Number(c.canary.id.slice(1)) % 16)
          : 2000 + Number(c.canary.id.slice(1)),
      }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 20 });
    expect(summary.epsilon_max?.map((x) => [x.bound, x.searched, x.confidence_each])).toEqual([
      ['clopper_pearson', 2, 0.975],
      ['one_run', 2, 0.975],
      ['gdp', 2, 0.975],
      ['fdp_one_run', 2, 0.975],
    ]);
    // Every run's readout carries all four bounds, the hull AUROC and the threshold strategy.
    for (const p of summary.privacy ?? []) {
      expect(p.epsilon.gdp?.threshold_strategy).toBe('bonferroni');
      expect(p.epsilon.fdp_one_run?.threshold_strategy).toBe('bonferroni');
      expect(p.epsilon.threshold_strategy).toBe('bonferroni');
      expect(p.auc_hull).toBeGreaterThanOrEqual(0.5);
    }
    // A split strategy is seeded by the report's seed and named in every readout.
    const split = (await computeReport({ auditDir: a.auditDir, resamples: 20, seed: 3, thresholdStrategy: 'split' }))
      .summary;
    expect(
      split.privacy?.map((p) => [p.epsilon.threshold_strategy, p.epsilon.fdp_one_run?.threshold_strategy]),
    ).toEqual([
      ['split(0.5, seed 3)', 'split(0.5, seed 3)'],
      ['split(0.5, seed 3)', 'split(0.5, seed 3)'],
    ]);
    // The Clopper–Pearson and binomial one-run bounds take the strategy too; GDP stays Bonferroni.
    expect(
      split.privacy?.map((p) => [
        p.epsilon.clopper_pearson?.threshold_strategy,
        p.epsilon.one_run?.threshold_strategy,
        p.epsilon.gdp?.threshold_strategy,
      ]),
    ).toEqual([
      ['split(0.5, seed 3)', 'split(0.5, seed 3)', 'bonferroni'],
      ['split(0.5, seed 3)', 'split(0.5, seed 3)', 'bonferroni'],
    ]);
    expect(renderMarkdown(buildDocument(split))).toContain(
      'Clopper–Pearson — split(0.5, seed 3); one run — split(0.5, seed 3); Gaussian DP — Bonferroni',
    );
    // The grid's analysis.threshold_strategy is the default the flag overrides.
    await writeFile(join(a.auditDir, 'grid.yaml'), 'analysis:\n  threshold_strategy: split\n');
    const fromGrid = (await computeReport({ auditDir: a.auditDir, resamples: 20, seed: 3 })).summary;
    expect(fromGrid.privacy?.map((p) => p.epsilon.threshold_strategy)).toEqual([
      'split(0.5, seed 3)',
      'split(0.5, seed 3)',
    ]);
    const overridden = (
      await computeReport({ auditDir: a.auditDir, resamples: 20, seed: 3, thresholdStrategy: 'bonferroni' })
    ).summary;
    expect(overridden.privacy?.[0]?.epsilon.threshold_strategy).toBe('bonferroni');
    // The two seeds share their canaries: one cell, its AUC over both runs with the crossed interval.
    expect(summary.privacy_auc?.map((x) => [x.probe_kind, x.runs, x.n_in, x.n_out, x.design, x.method])).toEqual([
      ['hidden', 2, 16, 16, 'crossed', 'studentized'],
    ]);
    const cellAuc = summary.privacy_auc?.[0];
    const perRun = (summary.privacy ?? []).map((p) => p.auc?.estimate as number);
    expect(cellAuc?.estimate).toBeCloseTo((perRun[0] as number) / 2 + (perRun[1] as number) / 2, 12);
    expect(cellAuc?.lo).toBeLessThanOrEqual(cellAuc?.estimate as number);
    expect(cellAuc?.hi).toBeGreaterThanOrEqual(cellAuc?.estimate as number);
    // report.html carries every bound, its δ, confidence and threshold strategy, and the cell AUC table.
    const html = renderHtml(buildDocument(summary), []);
    for (const text of [
      'ε ≥ (Clopper–Pearson)',
      'ε ≥ (one run)',
      'ε ≥ (GDP)',
      'ε ≥ (f-DP one run)',
      'AUC (hull)',
      'all at δ = 0.00001, 95% confidence',
      'f-DP one run — bonferroni',
      'crossed canary × run 95% interval',
    ])
      expect(html).toContain(text);
    const md = renderMarkdown(buildDocument(summary));
    expect(md).toContain(
      "over the 2 runs searched — picking the largest is a search, so each run's bound here is at 97.50% (1 − 0.05/2, Bonferroni)",
    );
  });
});

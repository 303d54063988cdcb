import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDocument } from '../../src/report/document.js';
import { canaryDesignsSection, withoutDesign } from '../../src/report/canary-designs.js';
import { computeReport, type ComputedReport } from '../../src/report/index.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

/**
 * Two designs on three seeds each, eight inserted and eight held-out canaries per run: the
 * rare-token secrets rank first in every run, the codes rank 1 + 3·j, held-out canaries from 60
 * on (100 candidates each) (so exposure separates members from non-members perfectly in both designs).
 */
let root: string;
let report: ComputedReport;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'canary-designs-'));
  const runs: FixtureRun[] = [];
  for (const design of ['codes', 'rare-tokens'])
    for (const seed of [0, 1, 2])
      runs.push({
        cell: { visibility: 'redacted', dose: 16, design, seed },
        canaries: Array.from({ length: 8 }, (_, j) => ({ id: `f00${j}`, code: String(1000 + j), dose: 16 })),
        heldOut: Array.from({ length: 8 }, (_, j) => ({ id: `h00${j}`, code: String(2000 + j) })),
        phases: ['base', 'final'],
        randomizedInclusion: true,
        space: { kind: 'sampled', decoys: 99 },
      });
  const a = await buildFixtureAudit(join(root, 'designs'), {
    name: 'designs',
    runs,
    outcome: (c) => {
      const j = Number(c.canary.id.slice(1));
      if (c.phase === 'base') return { rank: 50 + j };
      if (!c.canary.inserted) return { rank: 60 + 3 * j + c.runIndex };
      return { rank: c.run.cell.design === 'codes' ? 1 + 3 * j + c.runIndex : 1 };
    },
  });
  report = await computeReport({ auditDir: a.auditDir, resamples: 50 });
});
afterAll(() => rm(root, { recursive: true, force: true }));

describe('canary designs section', () => {
  it('puts the designs side by side in summary.json, every membership score with its readouts', () => {
    const d = report.summary.canary_designs;
    expect(d?.designs).toEqual(['codes', 'rare-tokens']);
    expect(d?.rows.map((r) => [r.design, r.context, r.n_runs, r.n_canaries, r.space.size])).toEqual([
      ['codes', 'all runs', 3, 8, 100],
      ['rare-tokens', 'all runs', 3, 8, 100],
    ]);
    const [codes, rare] = d?.rows ?? [];
    // Rank 1 everywhere: exposure at the ceiling log2 100.
    expect(rare?.exposure?.estimate).toBeCloseTo(Math.log2(100), 9);
    expect(codes?.exposure?.estimate).toBeLessThan(rare?.exposure?.estimate as number);
    for (const row of d?.rows ?? []) {
      expect(row.membership.map((m) => m.score)).toEqual(['exposure', 'loss', 'reference_ratio', 'zlib_ratio']);
      const exposure = row.membership[0];
      expect(exposure).toMatchObject({ n_in: 24, n_out: 24, auc: { estimate: 1, lo: 1, hi: 1, n_runs: 3 } });
      expect(exposure?.tpr_at_fpr.map((t) => [t.fpr, t.k, t.n])).toEqual([
        [0.01, 24, 24],
        [0.001, 24, 24],
      ]);
      expect(exposure?.epsilon.map((e) => [e.bound, e.searched])).toEqual([
        ['clopper_pearson', 3],
        ['one_run', 3],
        ['gdp', 3],
        ['fdp_one_run', 3],
      ]);
      // Eight canaries a side per run is too few for a positive bound at 1 − 0.05/3: 0, not NaN.
      for (const e of exposure?.epsilon ?? []) expect(e.epsilon).toBeGreaterThanOrEqual(0);
    }
  });

  it('declares the comparison between designs in the verdict family', () => {
    const v = report.summary.verdicts?.filter((x) => x.kind === 'design') ?? [];
    expect(v).toHaveLength(1);
    expect(v[0]?.comparison).toBe('dose 16, hidden probes: design rare-tokens − codes');
    expect(v[0]?.estimate).toBeGreaterThan(0);
    expect(v[0]?.family_size).toBe(report.summary.verdicts?.length);
    expect(v[0]?.sentence).toMatch(/^The rare-tokens design \(dose 16\) .* codes: \+\d/);
  });

  it('renders the section with both tables, and nothing for an audit without designs', () => {
    const md = renderMarkdown(buildDocument(report.summary));
    expect(md).toContain('## Canary designs');
    expect(md).toContain('Membership by design and score');
    expect(md).toMatch(/reference ratio \(log-probability − base model’s\)/);
    expect(canaryDesignsSection(undefined)).toBeNull();
    expect(withoutDesign('dose=16, design=codes')).toBe('dose=16');
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeReport } from '../../src/report/index.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import { buildDocument } from '../../src/report/document.js';
import { TWO_RUNS_FLAG } from '../../src/metrics/bootstrap.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';

const canaries = Array.from({ length: 12 }, (_, i) => ({
  id: `f${String(i).padStart(3, '0')}`,
  code: String(1000 + 17 * i),
  dose: 4,
  visibility: 'redacted' as const,
}));
const heldOut = Array.from({ length: 6 }, (_, i) => ({ id: `h00${i}`, code: String(5000 + 31 * i) }));
const CEILING = Math.log2(10000);

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-interval-flags-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Ranks of a cell where 5 of 12 canaries reach rank 1 in every run: ~42% of the values at the ceiling. */
function ceilingHeavy(c: { runIndex: number; canary: { id: string; inserted: boolean } }): { rank: number } {
  const i = Number(c.canary.id.slice(1));
  if (!c.canary.inserted) return { rank: 3000 + 100 * i };
  return { rank: i < 5 ? 1 : 2 + i * (3 + c.runIndex) };
}

describe('figures the coverage bench found too narrow are marked where they are printed', () => {
  it('marks a 2-run, ceiling-heavy cell in summary.json, the warnings and the Markdown, and reads its median on the ranks', async () => {
    const runs: FixtureRun[] = [0, 1].map((seed) => ({
      cell: { dose: 4, visibility: 'redacted', seed },
      canaries,
      heldOut,
    }));
    const a = await buildFixtureAudit(join(root, 'two'), { name: 'two-runs', runs, outcome: ceilingHeavy });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 60 });
    const g = summary.groups.find((x) => x.cohort === 'focal' && x.phase === 'final');
    const e = g?.inserted.exposure;
    expect(e).toMatchObject({ n: 24, n_clusters: 2, resampling: 'crossed', method: 'rank', flags: [TWO_RUNS_FLAG] });
    // 10 of 24 values at the ceiling: the interval reaches the ceiling and does not collapse on it.
    expect(e?.hi).toBe(CEILING);
    expect(e?.lo).toBeLessThan(e?.estimate as number);
    // Δ vs held-out: the inserted side is piled at the ceiling, so the sides' own intervals are differenced.
    expect(g?.controls.held_out?.difference).toMatchObject({ method: 'bounds', flags: [TWO_RUNS_FLAG] });
    // The top-1 share (the share at the ceiling) pools the runs with an interval that respects them.
    expect(g?.inserted.top1).toMatchObject({
      k: 10,
      n: 24,
      n_runs: 2,
      method: 'design-wilson',
      flags: [TWO_RUNS_FLAG],
    });
    expect(summary.warnings.find((w) => w.kind === 'two_runs')?.message).toMatch(
      /^1 focal figure\(s\) rest on 2 runs per arm/,
    );
    const md = renderMarkdown(buildDocument(summary));
    expect(md).toContain(`(⚠ ${TWO_RUNS_FLAG})`);
    expect(md).toContain('crossed: runs × canaries, two-way; on the ranks (values tied at the ceiling or floor)');
  });

  it('leaves a healthy 3-run cell unmarked', async () => {
    const runs: FixtureRun[] = [0, 1, 2].map((seed) => ({
      cell: { dose: 4, visibility: 'redacted', seed },
      canaries,
      heldOut,
    }));
    // Ranks spread over 20–2000: no value at the ceiling or the floor.
    const a = await buildFixtureAudit(join(root, 'three'), {
      name: 'three-runs',
      runs,
      outcome: (c) => ({
        rank: c.canary.inserted
          ? 20 + 150 * Number(c.canary.id.slice(1)) + 7 * c.runIndex
          : 3000 + 100 * Number(c.canary.id.slice(1)),
      }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 60 });
    const g = summary.groups.find((x) => x.cohort === 'focal' && x.phase === 'final');
    expect(g?.inserted.exposure).toMatchObject({ n_clusters: 3, method: 'studentized' });
    expect(g?.inserted.exposure?.flags).toBeUndefined();
    expect(g?.controls.held_out?.difference?.flags).toBeUndefined();
    expect(g?.inserted.top1?.flags).toBeUndefined();
    expect(summary.warnings.map((w) => w.kind)).not.toContain('two_runs');
    expect(renderMarkdown(buildDocument(summary))).not.toContain('⚠ 2 runs per arm');
  });
});

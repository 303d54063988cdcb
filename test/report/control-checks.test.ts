import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WeightChange } from '../../src/contracts/result.js';
import { buildDocument } from '../../src/report/document.js';
import { computeReport } from '../../src/report/index.js';
import { renderMarkdown } from '../../src/report/markdown.js';
import { CONTROL_WARNING_KINDS } from '../../src/report/provenance-check.js';
import { validate } from '../../src/schemas/index.js';
import {
  buildFixtureAudit,
  cellId,
  type FixtureRun,
  type OutcomeContext,
  type ProbeOutcome,
} from '../fixtures/audit-builder.js';

/**
 * Controls that fail loud: each warning raised by a built audit that breaks its control, and
 * silent on one healthy audit that has every control in place.
 */
const focal = Array.from({ length: 6 }, (_, i) => ({
  id: `f00${i}`,
  code: String(1000 + 17 * i),
  dose: 4,
  visibility: 'visible',
}));
const heldOut = Array.from({ length: 20 }, (_, i) => ({
  id: `h${String(i).padStart(3, '0')}`,
  code: String(5000 + 31 * i),
}));
const moved = (changed: number): WeightChange => ({
  since_update: 0,
  changed,
  total: 3,
  groups: ['embed.weight', 'block.0.attn.weight', 'head.weight'].map((name, i) => ({
    name,
    numel: 64,
    norm_start: 2,
    norm_delta: i < changed ? 0.1 : 0,
    rel_change: i < changed ? 0.05 : 0,
  })),
});
const index = (id: string): number => Number(id.slice(1));
/** Held-out ranks that interleave: the two halves (even and odd ids) and the no-canary canaries mix. */
const mixedRank = (id: string, run: number): number => 2000 + ((index(id) * 7919 + run * 104729) % 6000);

/** The healthy audit's outcome: focal memorized, held-out spread, the base copies every shown code. */
function healthy(c: OutcomeContext): ProbeOutcome {
  if (c.kind === 'substituted')
    return {
      rank: 3000 + index(c.canary.id),
      greedy: c.phase === 'base' || !c.canary.inserted ? c.shown : c.canary.code,
    };
  if (c.canary.inserted && c.phase === 'final') return { rank: 1 + index(c.canary.id) + c.runIndex };
  return { rank: mixedRank(c.canary.id, c.runIndex) };
}

const seeds = [0, 1, 2];
const healthyRuns = (): FixtureRun[] =>
  seeds.map((seed) => ({
    cell: { visibility: 'visible', dose: 4, seed },
    canaries: focal,
    heldOut,
    phases: ['base', 'final'],
    kinds: ['hidden', 'substituted'],
    weightChange: moved(3),
  }));

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-controls-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function report(name: string, runs: FixtureRun[], outcome: (c: OutcomeContext) => ProbeOutcome) {
  const a = await buildFixtureAudit(join(root, name), { name, runs, outcome });
  const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 40 });
  return { summary, audit: a, warning: (kind: string) => summary.warnings.find((w) => w.kind === kind) };
}

describe('controls that fail loud', () => {
  it('stays silent on a healthy audit with every control in place', async () => {
    const { summary } = await report('healthy', healthyRuns(), healthy);
    expect(
      summary.warnings.map((w) => w.kind).filter((k) => (CONTROL_WARNING_KINDS as readonly string[]).includes(k)),
    ).toEqual([]);
    // The checks did run: the base-phase substituted probes and the held-out halves were there.
    expect(summary.runs.every((r) => r.phases.includes('base'))).toBe(true);
  });

  it('weights_unchanged: a trained run whose parameter groups did not move', async () => {
    const runs = healthyRuns();
    (runs[1] as FixtureRun).weightChange = moved(0);
    (runs[2] as FixtureRun).weightChange = moved(2);
    const { summary, audit, warning } = await report('frozen', runs, healthy);
    const w = warning('weights_unchanged');
    expect(w?.runs).toEqual([audit.runs[1]?.runId, audit.runs[2]?.runId]);
    expect(w?.message).toContain('0 of 3 parameter groups moved since update 0');
    expect(w?.message).toContain('2 of 3 parameter groups moved since update 0, unchanged: head.weight');
    expect(w?.cells).toEqual([
      cellId({ visibility: 'visible', dose: 4, seed: 1 }),
      cellId({ visibility: 'visible', dose: 4, seed: 2 }),
    ]);
    // First among the warnings, at the top of the report, and valid against the report schema.
    expect(summary.warnings[0]?.kind).toBe('weights_unchanged');
    expect(validate('report', JSON.parse(JSON.stringify(summary)))).toEqual([]);
    const md = renderMarkdown(buildDocument(summary));
    expect(md.indexOf('Control failed — weights_unchanged')).toBeGreaterThan(-1);
    expect(md.indexOf('Control failed — weights_unchanged')).toBeLessThan(md.indexOf('## Exposure vs dose'));
  });

  it('null_broken: two halves of the held-out canaries score apart (no no-canary control in the grid)', async () => {
    // h000–h009 near the top in every seed, h010–h019 near the bottom: the cell's two halves.
    const { warning, audit } = await report('halves', healthyRuns(), (c) =>
      !c.canary.inserted && c.kind === 'hidden' && c.phase === 'final'
        ? { rank: index(c.canary.id) < 10 ? 1 + index(c.canary.id) : 9000 + index(c.canary.id) }
        : healthy(c),
    );
    const w = warning('null_broken');
    expect(w?.message).toMatch(
      /^the audit's null is broken: canaries that were never inserted score apart from each other in 1 of 1 null comparison\(s\)/,
    );
    // The three seeds pooled: one score per canary, its mean over the cell's runs.
    expect(w?.message).toContain(
      '(all runs) (held-out canaries, first half by id against the second, 20 canaries, mean over 3 runs)',
    );
    expect(w?.message).toContain('97.50% each (95% over 1 null comparison × 2 tests, Bonferroni)');
    expect(w?.runs).toEqual(audit.runs.map((r) => r.runId));
    expect(w?.cells).toHaveLength(3);
  });

  it('null_broken: the no-canary control’s would-be focal canaries score above its held-out ones', async () => {
    const noCanary: FixtureRun = {
      cell: { visibility: 'visible', dose: 0, seed: 0 },
      canaries: [],
      heldOut: [...focal, ...heldOut],
      phases: ['final'],
      weightChange: moved(3),
    };
    const runs = [...healthyRuns(), noCanary];
    const broken = await report('no-canary-broken', runs, (c) =>
      c.runIndex === 3 && c.canary.id.startsWith('f') ? { rank: 1 + index(c.canary.id) } : healthy(c),
    );
    const w = broken.warning('null_broken');
    expect(w?.message).toContain('no-canary control: would-be focal vs held-out canaries');
    expect(w?.message).toContain('1 of 1 null comparison(s)');
    expect(w?.message).toContain(
      'dose=0 (no-canary control: would-be focal vs held-out canaries, 26 canaries, mean over 1 run)',
    );
    expect(w?.runs).toEqual([broken.audit.runs[3]?.runId]);
    // The same audit with the no-canary control's canaries mixed in among its held-out ones: silent.
    const fine = await report('no-canary-fine', runs, healthy);
    expect(fine.warning('null_broken')).toBeUndefined();
  });

  it('base_cannot_copy: a visible arm whose base does not copy shown codes in one seed', async () => {
    const { warning, audit } = await report('no-copy', healthyRuns(), (c) =>
      c.phase === 'base' && c.kind === 'substituted' && c.runIndex === 0 ? { rank: 3000, greedy: null } : healthy(c),
    );
    const w = warning('base_cannot_copy');
    expect(w?.message).toContain(
      'base copy rate per seed (base phase, substituted probes, prefill) seed=0 0/26 (0%), seed=1 26/26 (100%), seed=2 26/26 (100%); below 90% for seed=0',
    );
    expect(w?.runs).toEqual([audit.runs[0]?.runId]);
  });

  it('base_cannot_copy: a base copying three codes in four is not enough, nine in ten is', async () => {
    // Seed 0's base misses 6 of 26 shown codes (77%, like the GUI-VLM base that copied 12/16 and
    // left its visible arm +1.39 bits above control); seed 1's misses 2 (92%).
    const misses = [6, 2, 0];
    const { warning, audit } = await report('some-copy', healthyRuns(), (c) =>
      c.phase === 'base' &&
      c.kind === 'substituted' &&
      !c.canary.inserted &&
      index(c.canary.id) < (misses[c.runIndex] as number)
        ? { rank: 3000, greedy: null }
        : healthy(c),
    );
    const w = warning('base_cannot_copy');
    expect(w?.message).toContain('seed=0 20/26 (77%), seed=1 24/26 (92%), seed=2 26/26 (100%); below 90% for seed=0.');
    expect(w?.runs).toEqual([audit.runs[0]?.runId]);
  });

  it('scores_all_tied: a cell whose every score is the same (a flat run)', async () => {
    const runs = healthyRuns();
    runs.push({
      cell: { visibility: 'redacted', dose: 4, seed: 0 },
      canaries: focal.map((f) => ({ ...f, visibility: 'redacted' })),
      heldOut,
      weightChange: moved(3),
    });
    const { warning, audit } = await report('flat', runs, (c) => (c.runIndex === 3 ? { rank: 10000 } : healthy(c)));
    const w = warning('scores_all_tied');
    expect(w?.message).toContain(
      `${cellId({ visibility: 'redacted', dose: 4, seed: 0 })}, hidden probes: all 26 at 0.00 bits (1 run)`,
    );
    expect(w?.runs).toEqual([audit.runs[3]?.runId]);
    // A flat run also leaves its held-out halves tied: the null is not "broken" by it.
    expect(warning('null_broken')).toBeUndefined();
  });
});

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeReport, type ComputedReport } from '../../src/report/index.js';
import { buildFixtureAudit, substituteFor } from '../fixtures/audit-builder.js';

let root: string;
let sampled: ComputedReport;
let exhaustive: ComputedReport;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-spaces-'));
  const a = await buildFixtureAudit(join(root, 's'), {
    name: 'sampled',
    runs: [
      {
        cell: { seed: 0 },
        canaries: [{ id: 'f000', code: '4821', dose: 2 }],
        heldOut: [{ id: 'h000', code: '1234' }],
        space: { kind: 'sampled', decoys: 99 },
        kinds: ['hidden', 'substituted'],
      },
    ],
    outcome: (c) => (c.canary.inserted ? { rank: 4, ties: 2 } : { rank: 100 }),
  });
  sampled = await computeReport({ auditDir: a.auditDir, resamples: 10 });
  const b = await buildFixtureAudit(join(root, 'e'), {
    name: 'copying',
    runs: [
      {
        cell: { seed: 0 },
        canaries: [{ id: 'f000', code: '0042', dose: 2, visibility: 'visible' }],
        heldOut: [],
        kinds: ['substituted'],
        decode: ['prefill', 'free'],
      },
    ],
    outcome: () => ({ rank: 2, shownTop: true, greedy: substituteFor('0042'), free: '0042' }),
  });
  exhaustive = await computeReport({ auditDir: b.auditDir, resamples: 10 });
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('candidate spaces', () => {
  it('ranks a sampled space within its own candidates and carries its size and ceiling', () => {
    const o = sampled.observations.find((x) => x.probe_id === 'f000.hidden');
    expect(o).toMatchObject({ space_kind: 'sampled', space_size: 100, rank: 4, ties: 2 });
    expect(o?.exposure).toBeCloseTo(Math.log2(100) - 2, 12);
    expect(o?.exposure_ceiling).toBeCloseTo(Math.log2(100), 12);
    const held = sampled.observations.find((x) => x.probe_id === 'h000.hidden');
    expect(held?.exposure).toBe(0);
    const g = sampled.summary.groups.find((x) => x.probe_kind === 'hidden');
    expect(g?.space).toEqual({ kind: 'sampled', size: 100, ceiling: Math.log2(100) });
  });

  it('has no shown-code rank when the shown code is not a sampled candidate', () => {
    const o = sampled.observations.find((x) => x.probe_id === 'f000.substituted');
    expect(o?.shown_code).toBe(substituteFor('4821'));
    expect(o?.shown_rank).toBeNull();
  });

  it('measures copying against recall on substituted probes, per decode mode', () => {
    const o = exhaustive.observations[0];
    expect(o).toMatchObject({ probe_kind: 'substituted', rank: 2, shown_rank: 1 });
    expect(o?.shown_exposure).toBeCloseTo(Math.log2(10000), 12);
    expect(o?.greedy_prefill).toEqual({ code: substituteFor('0042'), recovered: false, copied: true });
    expect(o?.greedy_free).toEqual({ code: '0042', recovered: true, copied: false });
    const g = exhaustive.summary.groups[0];
    expect(g?.inserted.copy).toMatchObject({ prefill: { k: 1, n: 1 }, free: { k: 0, n: 1 } });
    expect(g?.inserted.recovery).toMatchObject({ prefill: { k: 0, n: 1 }, free: { k: 1, n: 1 } });
    // No control arm at all: the report says so instead of printing the figure alone.
    expect(exhaustive.summary.warnings.map((w) => w.kind)).toContain('no_control');
  });
});

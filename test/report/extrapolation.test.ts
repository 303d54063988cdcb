import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Observation } from '../../src/metrics/observation.js';
import { Rng } from '../../src/random.js';
import { buildDocument } from '../../src/report/document.js';
import { extrapolationGroups } from '../../src/report/extrapolation.js';
import { renderHtml } from '../../src/report/html.js';
import { computeReport } from '../../src/report/index.js';
import type { LoadedAudit } from '../../src/report/load-audit.js';
import { readScoreFile } from '../../src/report/scores.js';
import { buildFixtureAudit, type FixtureAudit } from '../fixtures/audit-builder.js';

let root: string;
let audit: FixtureAudit;

/**
 * The fixture's decoys all score −20 (no distribution to fit); this reader spreads them as N(−20, 1)
 * draws, seeded by the file, keeping every score that ties or beats the true code: the ranks stay.
 */
const spread: typeof readScoreFile = async (path, expected) => {
  const scores = await readScoreFile(path, expected);
  const rng = new Rng('spread', path);
  return scores.map((s) =>
    s === -20 ? -20 + Math.sqrt(-2 * Math.log(1 - rng.float())) * Math.cos(2 * Math.PI * rng.float()) : s,
  );
};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-extrapolation-'));
  const canaries = Array.from({ length: 4 }, (_, i) => ({ id: `f00${i}`, code: String(4821 + 97 * i), dose: 2 }));
  const heldOut = Array.from({ length: 4 }, (_, i) => ({ id: `h00${i}`, code: String(1234 + 89 * i) }));
  audit = await buildFixtureAudit(join(root, 'x'), {
    name: 'extrapolation',
    runs: [0, 1].map((seed) => ({ cell: { seed }, canaries, heldOut, space: { kind: 'sampled', decoys: 199 } })),
    // Inserted canaries rank first (the true code −5 sits 15 sd above the spread decoys); held-out ones 120th.
    outcome: (c) => (c.canary.inserted ? { rank: 1 } : { rank: 120 }),
  });
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('extrapolated exposure in summary.json and report.html', () => {
  it('is off by default, and on request reads beyond the rank ceiling beside the rank exposure', async () => {
    const off = await computeReport({ auditDir: audit.auditDir, resamples: 10, hooks: { readScores: spread } });
    expect(off.summary.extrapolation).toBeUndefined();
    expect(off.observations.every((o) => o.extrapolated === undefined)).toBe(true);
    const on = await computeReport({
      auditDir: audit.auditDir,
      resamples: 10,
      extrapolate: true,
      hooks: { readScores: spread },
    });
    const ceiling = Math.log2(200);
    const focal = on.summary.extrapolation?.find((g) => g.role === 'focal');
    expect(focal).toMatchObject({ n: 8, at_ceiling: 8, probe_kind: 'hidden' });
    expect(focal?.rank_exposure_median).toBeCloseTo(ceiling, 12);
    // −5 against N(−20, 1) decoys: P(decoy ≥ −5) ≈ 3.7e-51, about 167 bits; fitted from 199 decoys.
    expect(focal?.extrapolated_median).toBeGreaterThan(100);
    // A fit the diagnostics reject (about 1 in 20 by chance here) is withheld, never shown above the ceiling.
    expect((focal?.ok as number) + (focal?.withheld as number)).toBe(8);
    expect(focal?.ok).toBeGreaterThanOrEqual(6);
    expect(focal?.above_ceiling).toBe(focal?.ok);
    const held = on.summary.extrapolation?.find((g) => g.role === 'held_out');
    expect(held?.n).toBe(8);
    expect(held?.at_ceiling).toBe(0);
    // Rank 120 of 200 among decoys in two clusters (119 at −1, 80 spread around −20): no skew-normal
    // fits them, the diagnostics say so, and nothing is shown above the ceiling.
    expect(held?.rank_exposure_median).toBeCloseTo(Math.log2(200 / 120), 12);
    expect(held?.flagged).toBe(8);
    expect(held?.above_ceiling).toBe(0);
    expect(held?.extrapolated_median).toBeLessThanOrEqual(ceiling);
    const html = renderHtml(buildDocument(on.summary), []);
    expect(html).toContain('Extrapolated exposure');
    expect(html).toContain('Fits ok · flagged · withheld · unfit');
  });

  it('counts a withheld or unfit fit and lets its rank exposure stand in, never a value above the ceiling', () => {
    const base = {
      run_id: 'r0',
      phase: 'final',
      role: 'focal',
      probe_kind: 'hidden',
      exposure_ceiling: Math.log2(1000),
    } as const;
    const obs = [
      {
        ...base,
        rank: 1,
        exposure: Math.log2(1000),
        extrapolated: { exposure: 20, fitted_exposure: 20, status: 'ok' },
      },
      {
        ...base,
        rank: 1,
        exposure: Math.log2(1000),
        extrapolated: { exposure: null, fitted_exposure: 30, status: 'withheld' },
      },
      {
        ...base,
        rank: 8,
        exposure: Math.log2(125),
        extrapolated: { exposure: null, fitted_exposure: null, status: 'unfit' },
      },
    ] as unknown as Observation[];
    const a = { runs: [{ run_id: 'r0', cell: { seed: 0, lr: 1 } }] } as unknown as LoadedAudit;
    const [g] = extrapolationGroups(a, obs, { seedAxes: ['seed'] });
    expect(g).toMatchObject({ cell: 'lr=1', n: 3, at_ceiling: 2, ok: 1, withheld: 1, unfit: 1, above_ceiling: 1 });
    // Medians: rank {9.97, 9.97, 6.97}; extrapolated {20, 9.97 (withheld → rank), 6.97 (unfit → rank)}.
    expect(g?.rank_exposure_median).toBeCloseTo(Math.log2(1000), 12);
    expect(g?.extrapolated_median).toBeCloseTo(Math.log2(1000), 12);
  });
});

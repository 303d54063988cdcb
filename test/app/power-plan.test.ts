import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planPower, powerText } from '../../src/app/power-plan.js';
import { POWER_DEFAULTS, pooledSd, powerBackendOf, sdOfComponents } from '../../src/app/power-defaults.js';
import { planAuditText } from '../../src/manifest/index.js';
import { lookSchedule } from '../../src/metrics/sequential.js';
import { sequentialPower } from '../../src/metrics/sequential-power.js';
import { assumedComponents, decisionProbability, scaledVariance } from '../../src/metrics/verdict.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';
import { STAMP } from '../helpers/stamp.js';

const grid = (seeds: string, extra = ''): string => `
axes:
  visibility: [visible, redacted]
  dose: [1, 4]
  seed: [${seeds}]
training:
  batch_size: 8
  updates: 40
  lr: 0.001
canaries:
  focal: 8
  held_out: 6
${extra}`;
const plan = (text: string) => planAuditText('grid.yaml', text, { ...STAMP, versions: {} });

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-power-plan-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('plan --power defaults per backend', () => {
  it('recovers the sds assumedComponents was built from, and pools medians as a root mean square', () => {
    const sd = { run: 1.2, canary: 0.7, interaction: 2.5 };
    const back = sdOfComponents(assumedComponents(sd, 3, 16));
    for (const k of ['run', 'canary', 'interaction'] as const) expect(back?.[k]).toBeCloseTo(sd[k], 12);
    const pooled = pooledSd([
      assumedComponents({ run: 1, canary: 1, interaction: 1 }, 3, 16),
      assumedComponents({ run: 7, canary: 1, interaction: 1 }, 5, 8),
      { design: 'nested', run: 9, canary: 0, residual: 9, runs: 3, canaries: 16 },
    ]);
    expect(pooled?.n).toBe(2);
    expect(pooled?.sd.run).toBeCloseTo(5, 12);
    expect(pooled?.sd.canary).toBeCloseTo(1, 12);
    expect(pooledSd([])).toBeNull();
  });

  it("picks the backend of the grid's model and says which defaults it used", async () => {
    expect(powerBackendOf({ backend: 'hf' })).toBe('hf');
    expect(
      powerBackendOf({ backend: 'tiny', tiny: { n_layer: 2, n_head: 2, d_model: 64, max_len: 64, dropout: 0 } }),
    ).toBe('tiny');
    const hf = await planPower(
      plan(
        grid('0, 1, 2', 'models:\n  small: {backend: hf, name: org/model, revision: main}\n').replace(
          'seed: [0, 1, 2]',
          'seed: [0, 1, 2]\n  model: [small]',
        ),
      ),
      { effect: 3 },
    );
    expect(hf.defaults?.backend).toBe('hf');
    expect(hf.defaults?.measured).toBe(false);
    expect(powerText(hf)).toContain("sd in bits of an arm's median run 1.50, canary 2.00, run × canary 1.00");
    expect(powerText(hf)).toContain('not measured on this backend');
    // Two backends in one grid: the defaults of the one with the larger arm variance, named with both.
    const mixed = await planPower(
      plan(
        grid('0, 1, 2', 'models:\n  small: {backend: hf, name: org/model, revision: main}\n').replace(
          'seed: [0, 1, 2]',
          'seed: [0, 1, 2]\n  model: [tiny, small]',
        ),
      ),
      { effect: 3 },
    );
    const total = (b: 'tiny' | 'hf') =>
      POWER_DEFAULTS[b].arm.run ** 2 + POWER_DEFAULTS[b].arm.canary ** 2 + POWER_DEFAULTS[b].arm.interaction ** 2;
    expect(mixed.defaults?.backend).toBe(total('hf') >= total('tiny') ? 'hf' : 'tiny');
    expect(powerText(mixed)).toContain("of this grid's backends: tiny, hf)");
  });
});

describe('plan --power', () => {
  it('without a pilot: the declared family with the backend defaults, at the stated effect', async () => {
    const p = await planPower(plan(grid('0, 1, 2')), { effect: 3 });
    expect(p.rows.map((r) => r.comparison)).toEqual([
      'visibility=visible, dose=4: inserted − held-out control',
      'visibility=visible: dose 4 − dose 1',
      'visibility=redacted, dose=4: inserted − held-out control',
      'visibility=redacted: dose 4 − dose 1',
      'visibility redacted − visible, paired',
    ]);
    // The control row is the decision probability of the two arms' assumed components, 3 seeds × 8 and × 6 canaries.
    const arm = POWER_DEFAULTS.tiny.arm;
    const v = scaledVariance([assumedComponents(arm, 3, 8), assumedComponents(arm, 3, 6)], 1, 1);
    expect(p.rows[0]?.probability).toBeCloseTo(decisionProbability(3, Math.sqrt(v.variance), v.df, 1, 0.05), 12);
    expect(p.margin_bits).toBe(1);
    expect(powerText(p)).toMatch(
      /^power: 3 seed\(s\) per cell × 8 focal canaries per run; α 0.05, margin ±1 bits, target 80%\n {2}variance: the tiny backend's defaults \(measured: .*audit-[0-9a-f]{12}.*\): sd in bits of an arm's median run \d\.\d\d, canary \d\.\d\d, run × canary \d\.\d\d; of a paired difference .*; for this grid's own, give --pilot AUDIT_DIR\n/,
    );
    expect(p.defaults?.backend).toBe('tiny');
    // More seeds as written: a higher probability; a grid's own margin is used.
    const more = await planPower(plan(grid('0, 1, 2, 3, 4, 5', 'analysis: {margin_bits: 2}')), { effect: 3 });
    expect(more.margin_bits).toBe(2);
    expect(more.rows[4]?.probability as number).toBeGreaterThan(p.rows[4]?.probability as number);
    for (const r of p.rows) expect(r.advice).toMatch(/^(reaches 80% as written|cheapest: |not within )/);
  });

  it('a sequential grid: P(decided by max) under its spending rule and the expected seeds', async () => {
    const fixed = await planPower(plan(grid('0, 1, 2, 3, 4, 5')), { effect: 2 });
    expect(fixed.sequential).toBeUndefined();
    expect(fixed.rows[0]?.sequential).toBeUndefined();
    const seq = await planPower(
      plan(grid('0, 1, 2, 3, 4, 5', 'replicates: {until: decided, min: 3, max: 6, spending: obrien-fleming}')),
      { effect: 2 },
    );
    expect(seq.sequential).toEqual({ min: 3, max: 6, spending: 'obrien-fleming' });
    const schedule = lookSchedule({ min: 3, max: 6, spending: 'obrien-fleming', alpha: 0.05 });
    const arm = POWER_DEFAULTS.tiny.arm;
    const expected = sequentialPower(2, [assumedComponents(arm, 6, 8), assumedComponents(arm, 6, 6)], 8, schedule, 1);
    expect(seq.rows[0]?.sequential?.probability).toBeCloseTo(expected?.probability as number, 12);
    expect(seq.rows[0]?.sequential?.expected_seeds).toBeCloseTo(expected?.expected_seeds as number, 12);
    // The fixed figures stay those of max seeds.
    expect(seq.rows.map((r) => r.probability)).toEqual(fixed.rows.map((r) => r.probability));
    const text = powerText(seq);
    expect(text).toContain('sequential: looks at 3 to ≤6 seeds per cell, obrien-fleming spending');
    expect(text).toMatch(
      /\n {4}sequential: P\(decided by 6\) ≈ \d\.\d\d \(≥ \d\.\d\d; independent looks \d\.\d\d\); expected \d\.\d of ≤6 seeds per cell \(each look alone: \d\.\d\d at 3, /,
    );
    expect(text.match(/P\(decided by 6\)/g)).toHaveLength(seq.rows.length);
  });

  it('with a pilot audit: its family, effects and components, rescaled to the grid', async () => {
    const canaries = (visibility: string) =>
      Array.from({ length: 8 }, (_, i) => ({ id: `f00${i}`, code: String(1000 + 17 * i), dose: 4, visibility }));
    const heldOut = Array.from({ length: 6 }, (_, i) => ({ id: `h00${i}`, code: String(5000 + 31 * i) }));
    const runs: FixtureRun[] = ['visible', 'redacted'].flatMap((visibility) =>
      [0, 1, 2].map((seed) => ({ cell: { visibility, dose: 4, seed }, canaries: canaries(visibility), heldOut })),
    );
    const a = await buildFixtureAudit(join(root, 'pilot'), {
      name: 'pilot',
      runs,
      outcome: (c) => {
        const k = Number(c.canary.id.slice(-1));
        if (c.canary.inserted && c.run.cell.visibility === 'redacted')
          return { rank: ([1, 40, 3][c.runIndex % 3] as number) * (1 + k) };
        return { rank: 300 + 600 * k + 900 * (c.runIndex % 3) };
      },
    });
    const asWritten = await planPower(plan(grid('0, 1, 2')), { pilot: a.auditDir });
    expect(asWritten.source).toMatch(
      /^pilot audit-[0-9a-f]{12} \(6 finished runs\): its variance components and observed effects$/,
    );
    expect(asWritten.rows.map((r) => r.comparison)).toEqual([
      'visibility=redacted, hidden probes: inserted − held-out control',
      'visibility=visible, hidden probes: inserted − held-out control',
      'hidden probes: visibility redacted − visible, paired',
    ]);
    const bigger = await planPower(plan(grid('0, 1, 2, 3, 4, 5, 6, 7')), { pilot: a.auditDir });
    for (const [i, r] of asWritten.rows.entries()) {
      expect(r.probability).not.toBeNull();
      expect(bigger.rows[i]?.effect).toBe(r.effect);
      expect(bigger.rows[i]?.probability as number).toBeGreaterThanOrEqual(r.probability as number);
    }
  });
});

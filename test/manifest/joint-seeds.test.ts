import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserInputErrors } from '../../src/errors.js';
import {
  buildManifestCore,
  planAuditText,
  runRenderer,
  trainingRowLines,
  type AuditPlan,
  type RunLayout,
} from '../../src/manifest/index.js';
import { computeReport } from '../../src/report/index.js';
import { buildFixtureAudit, type FixtureRun } from '../fixtures/audit-builder.js';
import { STAMP } from '../helpers/stamp.js';

const plan = (text: string): AuditPlan => planAuditText('grid.yaml', text, { ...STAMP, versions: {} });

const grid = (replicates: string): string => `
seed: 5
axes:
  visibility: [redacted]
  dose: [2]
  placement: [uniform, late]
  population: [single-dose, {kind: mixed-dose, doses: [3]}]
  seed: [0, 1, 2]
training: {batch_size: 8, updates: 60, lr: 0.001}
canaries: {focal: 6, held_out: 4}
${replicates}`;

const JOINT = 'replicates: {vary: joint}';
const cellOf = (p: AuditPlan, id: string): RunLayout => {
  const run = p.runs.find((r) => r.cell.id === id);
  if (!run) throw new Error(`no cell ${id}; cells: ${p.runs.map((r) => r.cell.id).join(' | ')}`);
  return run;
};
const positions = (run: RunLayout): string =>
  JSON.stringify(run.canaries.map((c) => [c.canary.id, c.cohort, c.positions]));
const rows = (p: AuditPlan, run: RunLayout): string[] => [
  ...trainingRowLines(p.grid, p.pool, run, runRenderer(p.grid, run)),
];
/** The background rows of a run (canary rows left out), by index. */
const background = (p: AuditPlan, run: RunLayout): Map<number, string> =>
  new Map(
    rows(p, run).flatMap((line) => {
      const row = JSON.parse(line) as { i: number; kind: string; prompt: unknown; target: string };
      return row.kind === 'background' ? [[row.i, JSON.stringify([row.prompt, row.target])] as const] : [];
    }),
  );
const canaries = (p: AuditPlan, run: RunLayout): string =>
  JSON.stringify(
    (({ canaries: c, held_out: h }) => [
      c.map((x) => [x.id, x.identity, x.code]),
      h.map((x) => [x.id, x.identity, x.code]),
    ])(buildManifestCore(p.grid, p.auditId, p.pool, run)),
  );

describe('joint seeds (replicates: {vary: joint})', () => {
  const joint = plan(grid(JOINT));
  const cell = 'placement=uniform,population=single-dose';

  it('gives two seeds of one cell different placements and background orders, the same canaries', () => {
    const [s0, s1] = [0, 1].map((s) => cellOf(joint, `${cell},seed=${s}`)) as [RunLayout, RunLayout];
    expect(positions(s0)).not.toBe(positions(s1));
    // Every focal canary moves (or at least most do): not one shared row set.
    const moved = s0.canaries.filter(
      (c, j) => JSON.stringify(c.positions) !== JSON.stringify(s1.canaries[j]?.positions),
    ).length;
    expect(moved).toBeGreaterThanOrEqual(s0.canaries.length - 1);
    const [b0, b1] = [background(joint, s0), background(joint, s1)];
    const shared = [...b0.keys()].filter((i) => b1.has(i));
    expect(shared.length).toBeGreaterThan(400);
    expect(shared.filter((i) => b0.get(i) === b1.get(i)).length).toBeLessThan(shared.length / 4);
    // Ids, identities and codes stay: the canaries are crossed with the seeds.
    expect(canaries(joint, s0)).toBe(canaries(joint, s1));
  });

  it('is reproducible: the same grid and seed give the same placement and rows', () => {
    const again = plan(grid(JOINT));
    for (const [k, run] of joint.runs.entries()) {
      const twin = again.runs[k] as RunLayout;
      expect(twin.cell.id).toBe(run.cell.id);
      expect(positions(twin)).toBe(positions(run));
    }
    const id = `${cell},seed=2`;
    expect(rows(again, cellOf(again, id))).toEqual(rows(joint, cellOf(joint, id)));
  });

  it('keeps, within one seed, the pairing across axes: focal rows equal across populations, one background', () => {
    const alone = cellOf(joint, `${cell},seed=1`);
    const mixed = cellOf(joint, 'placement=uniform,population=mixed-dose(3),seed=1');
    expect(JSON.stringify(mixed.canaries.filter((c) => c.cohort === 'focal').map((c) => c.positions))).toBe(
      JSON.stringify(alone.canaries.map((c) => c.positions)),
    );
    const [a, m] = [background(joint, alone), background(joint, mixed)];
    for (const [i, row] of m) if (a.has(i)) expect(row).toBe(a.get(i));
  });

  it('vary: training keeps every seed on the same rows and placement', () => {
    for (const text of ['replicates: {vary: training}']) {
      const p = plan(grid(text));
      const [s0, s2] = [0, 2].map((s) => cellOf(p, `${cell},seed=${s}`)) as [RunLayout, RunLayout];
      expect(positions(s0)).toBe(positions(s2));
      expect(rows(p, s0)).toEqual(rows(p, s2));
    }
    expect(positions(cellOf(plan(grid('replicates: {vary: training}')), `${cell},seed=0`))).not.toBe(
      positions(cellOf(joint, `${cell},seed=0`)),
    );
  });

  it('is the default of a grid that pretrains a tiny base and runs 2+ seeds: absent plans exactly what vary: joint plans', () => {
    for (const text of ['', 'replicates: {}']) {
      const p = plan(grid(text));
      expect(p.grid.design).toMatchObject({
        vary: 'joint',
        written: false,
        joint: true,
        baseInit: 0,
        population: 'fine-tuning seeds of one base',
      });
      for (const [k, run] of joint.runs.entries()) {
        expect(positions(p.runs[k] as RunLayout)).toBe(positions(run));
        expect(buildManifestCore(p.grid, p.auditId, p.pool, p.runs[k] as RunLayout).model).toEqual(
          buildManifestCore(joint.grid, joint.auditId, joint.pool, run).model,
        );
      }
    }
  });

  it('leaves a grid without a pretrained tiny base, or with one seed, as it was: rows fixed across seeds', () => {
    const scratch = plan(grid('').replace('  seed: [0, 1, 2]', '  seed: [0, 1, 2]\n  model: [tiny-small]'));
    expect(scratch.grid.design).toMatchObject({
      vary: 'training',
      written: false,
      joint: false,
      baseInit: null,
      population: 'seeds of from-scratch training',
    });
    const [s0, s2] = [0, 2].map((s) => cellOf(scratch, `${cell},seed=${s}`)) as [RunLayout, RunLayout];
    expect(rows(scratch, s0)).toEqual(rows(scratch, s2));
    const one = plan(grid('').replace('seed: [0, 1, 2]', 'seed: [2]'));
    expect(one.grid.design).toMatchObject({
      vary: 'training',
      joint: false,
      baseInit: null,
      population: 'one run per cell',
    });
    expect(one.runs[0]?.cell.values.model.value.pretrain?.init_seed).toBeUndefined();
  });

  it('is the default of an hf checkpoint with 2+ seeds (else its seeds of a full fine-tune are one run); not of a random init', () => {
    const hf = (extra: string): AuditPlan =>
      plan(
        grid('').replace(
          '  seed: [0, 1, 2]',
          `  seed: [0, 1, 2]\n  model: [{backend: hf, name: org/base, revision: ${'a'.repeat(40)}${extra}}]`,
        ),
      );
    const checkpoint = hf('');
    expect(checkpoint.grid.design).toMatchObject({
      vary: 'joint',
      written: false,
      joint: true,
      population: 'fine-tuning seeds of one base',
    });
    const [s0, s1] = [0, 1].map((s) => cellOf(checkpoint, `${cell},seed=${s}`)) as [RunLayout, RunLayout];
    expect(positions(s0)).not.toBe(positions(s1));
    expect(rows(checkpoint, s0)).not.toEqual(rows(checkpoint, s1));
    const scratch = hf(', random_init: true');
    expect(scratch.grid.design).toMatchObject({ vary: 'training', joint: false });
  });

  it('vary: base gives each seed its own base; refused where there is no base to vary or init_seed fixes one', () => {
    const p = plan(grid('replicates: {vary: base}'));
    expect(p.grid.design).toMatchObject({
      vary: 'base',
      written: true,
      joint: true,
      baseInit: null,
      population: 'bases and seeds',
    });
    // The same rows and placements as joint seeds; only the base differs.
    for (const [k, run] of joint.runs.entries()) expect(positions(p.runs[k] as RunLayout)).toBe(positions(run));
    const inits = p.runs.map((r) => buildManifestCore(p.grid, p.auditId, p.pool, r).model);
    expect(inits.every((m, k) => m.init_seed === p.runs[k]?.cell.values.seed.value)).toBe(true);
    expect(p.runs.every((r) => r.cell.values.model.value.pretrain?.init_seed === undefined)).toBe(true);
    const refused = (text: string): string => {
      try {
        plan(text);
      } catch (error) {
        return (error as Error).message;
      }
      return 'planned';
    };
    expect(
      refused(
        grid('replicates: {vary: base}').replace('  seed: [0, 1, 2]', '  seed: [0, 1, 2]\n  model: [tiny-small]'),
      ),
    ).toMatch(/replicates\.vary.*no model of this grid pretrains one.*use vary: joint/s);
    const fixed = grid('replicates: {vary: base}\nmodels: {one: {backend: tiny, pretrain: {init_seed: 3}}}').replace(
      '  seed: [0, 1, 2]',
      '  seed: [0, 1, 2]\n  model: [one]',
    );
    expect(refused(fixed)).toMatch(
      /grid\.yaml:\d+:\d+.*replicates\.vary.*one fix one base with pretrain\.init_seed; remove init_seed, or use vary: joint/s,
    );
  });

  it('refuses an unknown value', () => {
    expect(() => plan(grid('replicates: {vary: data}'))).toThrow(UserInputErrors);
    expect(() => plan(grid('replicates: {vary: bases}'))).toThrow(/training, joint, base|joint|base/);
    expect(() => plan(grid('replicates: {vary: joint, codes: nested}'))).toThrow(UserInputErrors);
  });
});

describe('the report on a joint-seeds audit', () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'ca-joint-'));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('resamples its seeds crossed with the canaries: the same ids and codes in every seed', async () => {
    const p = plan(grid(JOINT));
    const layouts = [0, 1, 2].map((s) => cellOf(p, `placement=late,population=single-dose,seed=${s}`));
    const runs: FixtureRun[] = layouts.map((layout) => {
      const core = buildManifestCore(p.grid, p.auditId, p.pool, layout);
      return {
        cell: { visibility: 'redacted', dose: 2, placement: 'late', seed: layout.cell.labels.seed },
        canaries: core.canaries.map((c) => ({ id: c.id, code: c.code, dose: c.dose, visibility: 'redacted' })),
        heldOut: core.held_out.map((c) => ({ id: c.id, code: c.code })),
      };
    });
    // The placements differ between the seeds, the canaries do not.
    expect(new Set(layouts.map(positions)).size).toBe(3);
    expect(new Set(runs.map((r) => JSON.stringify(r.canaries))).size).toBe(1);
    const a = await buildFixtureAudit(join(root, 'joint'), {
      name: 'joint',
      runs,
      outcome: (c) => ({ rank: c.canary.inserted ? 2 + c.runIndex * 50 + Number(c.canary.id.slice(1)) : 4000 }),
    });
    const { summary } = await computeReport({ auditDir: a.auditDir, resamples: 60 });
    const g = summary.groups.find((x) => x.cohort === 'focal' && x.phase === 'final');
    expect(g?.inserted.n_runs).toBe(3);
    expect(g?.inserted.exposure?.resampling).toBe('crossed');
    expect(g?.controls.held_out?.difference?.resampling).toBe('crossed');
    // The fixture's runs train from scratch on one rows file: the design says so, in summary.json.
    expect(summary.design).toMatchObject({
      population: 'seeds of from-scratch training',
      seeds: 3,
      seeds_vary: 'training seed only',
    });
  });
});

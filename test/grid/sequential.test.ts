import { describe, expect, it } from 'vitest';
import { designLine, parseGrid } from '../../src/grid/index.js';
import {
  buildManifestCore,
  planAuditText,
  runRenderer,
  trainingRowLines,
  type AuditPlan,
  type RunLayout,
} from '../../src/manifest/index.js';
import { BASE, expectOneError, inputErrors } from './helpers.js';
import { STAMP } from '../helpers/stamp.js';

const F = 'grids/sequential.yaml';

const grid = (seeds: string, replicates: string): string => `
seed: 5
axes:
  visibility: [visible, redacted]
  dose: [2]
  model: [tiny]
  seed: ${seeds}
training: {batch_size: 8, updates: 40, lr: 0.001}
canaries: {focal: 4, held_out: 4}
${replicates}`;

describe('replicates: {until: decided, min, max}', () => {
  it('plans max seeds per cell and says the sequential design in the design line', () => {
    const g = parseGrid(F, grid('[0, 1, 2, 3, 4, 5]', 'replicates: {until: decided, min: 3, max: 6}'));
    expect(g.design.sequential).toEqual({ min: 3, max: 6, spending: 'pocock', seeds: [0, 1, 2, 3, 4, 5] });
    expect(designLine(g.design, g.expansion.cells)).toBe(
      'design: one base per model (tiny: init seed 0), fine-tuning seeds 3 to ≤6 per cell, added while a declared comparison is undecided (Pocock-type alpha spending over 4 looks), each its own data order and canary placement; intervals generalize over fine-tuning seeds of one base',
    );
    const obf = parseGrid(
      F,
      grid('[0, 1, 2, 3]', 'replicates: {until: decided, min: 2, max: 4, spending: obrien-fleming, vary: joint}'),
    );
    expect(obf.design.sequential?.spending).toBe('obrien-fleming');
    expect(obf.design.vary).toBe('joint');
  });

  it('a look at n seeds trains exactly what a fixed grid with those n seeds trains (a prefix of it)', () => {
    const plan = (text: string): AuditPlan => planAuditText('grid.yaml', text, { ...STAMP, versions: {} });
    const seq = plan(grid('[0, 1, 2, 3, 4]', 'replicates: {until: decided, min: 2, max: 5}'));
    const fixed = plan(grid('[0, 1, 2]', ''));
    // Everything but the audit block (id, grid hash) is the same: rows, canaries, model, seed.
    const core = (p: AuditPlan, run: RunLayout) => {
      const { audit, ...rest } = buildManifestCore(p.grid, p.auditId, p.pool, run);
      return { ...rest, cell: audit.cell };
    };
    const rows = (p: AuditPlan, run: RunLayout) => [...trainingRowLines(p.grid, p.pool, run, runRenderer(p.grid, run))];
    expect(fixed.runs).toHaveLength(6);
    for (const run of fixed.runs) {
      const twin = seq.runs.find((r) => r.cell.id === run.cell.id) as RunLayout;
      expect(twin, run.cell.id).toBeDefined();
      expect(core(seq, twin)).toEqual(core(fixed, run));
      expect(rows(seq, twin)).toEqual(rows(fixed, run));
    }
  });

  it('refuses a seed axis that does not list max seeds, min above max, and min without until', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, grid('[0, 1, 2]', 'replicates: {until: decided, min: 2, max: 5}'))),
      `${F}:`,
      'replicates.max',
      'axes.seed lists 3 seeds',
      'list exactly 5 seeds',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, grid('[0, 1, 2]', 'replicates: {until: decided, min: 4, max: 3}'))),
      `${F}:`,
      'replicates.min',
      'use min ≤ max',
    );
    const lone = inputErrors(() => parseGrid(F, `${BASE}replicates: {min: 3}\n`));
    expect(lone.join('\n')).toMatch(/replicates.*until/);
    const bad = inputErrors(() => parseGrid(F, `${BASE}replicates: {until: always, min: 2, max: 3}\n`));
    expect(bad.join('\n')).toMatch(/replicates\.until/);
  });
});

import { describe, expect, it } from 'vitest';
import { parseGrid } from '../../src/grid/index.js';
import { BASE, expectOneError, inputErrors } from './helpers.js';

const F = 'grid.yaml';
const withAxes = (extra: string, tail = ''): string =>
  `${BASE.replace('  dose: [1, 4]', `  dose: [1, 4]\n${extra}`)}${tail}`;
const ids = (text: string): string[] => parseGrid(F, text).expansion.cells.map((c) => c.id);

describe('grid expansion', () => {
  it('takes the cartesian product in canonical axis order, last axis fastest', () => {
    expect(ids(BASE)).toEqual([
      'visibility=visible,dose=1',
      'visibility=visible,dose=4',
      'visibility=redacted,dose=1',
      'visibility=redacted,dose=4',
    ]);
    const grid = parseGrid(F, withAxes('  seed: [0, 1]\n  placement: [early, late]'));
    expect(grid.expansion.cells).toHaveLength(16);
    expect(grid.expansion.cells[0]?.id).toBe('visibility=visible,dose=1,placement=early,seed=0');
    expect(grid.expansion.cells[1]?.id).toBe('visibility=visible,dose=1,placement=early,seed=1');
    expect(new Set(grid.expansion.cells.map((c) => c.id)).size).toBe(16);
  });

  it('fills omitted axes with defaults and records every axis label in the cell', () => {
    const cell = parseGrid(F, BASE).expansion.cells[3];
    expect(cell?.labels).toEqual({
      visibility: 'redacted',
      dose: 4,
      placement: 'uniform',
      population: 'single-dose',
      schedule: 'constant',
      model: 'tiny',
      task: 'synthetic-email/compact',
      design: 'codes',
      seed: 0,
    });
    expect(cell?.values.placement?.value).toEqual({ window: [0, 1], spacing: null, final: null });
  });

  it('zips axes that vary together', () => {
    const text = withAxes('  placement: [early, late]', 'zip: [[dose, placement]]\n');
    expect(ids(text)).toEqual([
      'visibility=visible,dose=1,placement=early',
      'visibility=visible,dose=4,placement=late',
      'visibility=redacted,dose=1,placement=early',
      'visibility=redacted,dose=4,placement=late',
    ]);
    expectOneError(
      inputErrors(() => parseGrid(F, withAxes('  placement: [early]', 'zip: [[dose, placement]]\n'))),
      `${F}:10:7: zip[0]: `,
      'equal length',
      'dose: 2, placement: 1',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}zip: [[dose, seed]]\n`)),
      `${F}:9:14: zip[0][1]: `,
      '"seed" is not listed under axes',
    );
  });

  it('excludes cells matching a partial assignment, and rejects values no axis lists', () => {
    expect(ids(`${BASE}exclude: [{visibility: visible, dose: 1}]\n`)).toEqual([
      'visibility=visible,dose=4',
      'visibility=redacted,dose=1',
      'visibility=redacted,dose=4',
    ]);
    expect(ids(`${BASE}exclude: [{dose: 4}]\n`)).toEqual(['visibility=visible', 'visibility=redacted']);
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}exclude: [{dose: 8}]\n`)),
      `${F}:9:18: exclude[0].dose: `,
      '"8" is not a value of the dose axis; values: 1, 4',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}exclude: [{dose: 1}, {dose: 4}]\n`)),
      `${F}:9:10: exclude: `,
      'every cell is excluded',
    );
  });

  it('includes extra cells; unassigned axes take their first value; duplicates collapse', () => {
    const text = `${BASE}include:\n  - {visibility: encoded:binary, dose: 16}\n  - {placement: late}\n  - {visibility: visible, dose: 1}\n`;
    const cells = parseGrid(F, text).expansion.cells;
    expect(cells.map((c) => c.id)).toEqual([
      'visibility=visible,dose=1,placement=uniform',
      'visibility=visible,dose=4,placement=uniform',
      'visibility=redacted,dose=1,placement=uniform',
      'visibility=redacted,dose=4,placement=uniform',
      'visibility=encoded:binary,dose=16,placement=uniform',
      'visibility=visible,dose=1,placement=late',
    ]);
  });

  it('gives a no-canary cell no dose or placement, and keeps one such cell per other axis value', () => {
    const cells = parseGrid(F, withAxes('  population: [single-dose, none]')).expansion.cells;
    expect(cells.map((c) => c.id)).toEqual([
      'visibility=visible,dose=1,population=single-dose',
      'visibility=visible,population=none',
      'visibility=visible,dose=4,population=single-dose',
      'visibility=redacted,dose=1,population=single-dose',
      'visibility=redacted,population=none',
      'visibility=redacted,dose=4,population=single-dose',
    ]);
    const none = cells[1];
    expect(none?.values.dose).toBeNull();
    expect(none?.labels.dose).toBeNull();
    expect(none?.labels.placement).toBeNull();
  });

  it('labels structured values readably and rejects a label naming two values', () => {
    const text = withAxes(
      '  placement: [[0.5, 0.7], {window: late, spacing: 3, final: [0.9, 1]}]\n  schedule: [constant, {kind: cosine, warmup_updates: 5}]\n  population: [{kind: mixed-dose, doses: [8]}, {kind: cohorts, cohorts: [{dose: 2, count: 3, order: before}]}]',
    );
    const axes = parseGrid(F, text).expansion.axes;
    expect(axes.placement.map((v) => v.label)).toEqual(['0.5-0.7', 'late+gap3+final0.9-1']);
    expect(axes.schedule.map((v) => v.label)).toEqual(['constant', 'cosine(warmup5)']);
    expect(axes.population.map((v) => v.label)).toEqual(['mixed-dose(8)', 'cohorts(d2x3-before)']);
    const clash = withAxes('  placement: [late, {window: early, name: late}]');
    expectOneError(
      inputErrors(() => parseGrid(F, clash)),
      `${F}:5:21: axes.placement[1]: `,
      'label "late" already names a different placement value',
    );
  });

  it('resolves model presets, grid-defined presets and inline models', () => {
    const text = withAxes(
      '  model: [tiny, qwen3-1.7b, mine, {backend: hf, name: org/model, finetune: lora, revision: abc}]',
      'models:\n  mine: {backend: tiny, n_layer: 3, d_model: 64}\n',
    );
    const models = parseGrid(F, text).expansion.axes.model;
    expect(models.map((m) => m.label)).toEqual(['tiny', 'qwen3-1.7b', 'mine', 'org/model+lora']);
    expect(models[1]?.value).toMatchObject({
      backend: 'hf',
      name: 'Qwen/Qwen3-1.7B',
      revision: null,
      hf: { chat_template_kwargs: { enable_thinking: false } },
    });
    expect(models[2]?.value.tiny).toEqual({ n_layer: 3, n_head: 2, d_model: 64, max_len: 256, dropout: 0 });
    expect(models[3]?.value.finetune).toMatchObject({ method: 'lora', r: 16 });
    expect(models[3]?.value.revision).toBe('abc');
  });
});

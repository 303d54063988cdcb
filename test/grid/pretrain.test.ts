import { describe, expect, it } from 'vitest';
import { describePretrain, parseGrid, PRETRAIN_DEFAULTS } from '../../src/grid/index.js';
import { pretrainManifestSpec } from '../../src/manifest/pretrain.js';
import { BASE, expectOneError, inputErrors } from './helpers.js';

const F = 'grids/pretrain.yaml';
const withModels = (axis: string, tail = ''): string =>
  `${BASE.replace('  dose: [1, 4]', `  dose: [1, 4]\n  model: ${axis}`)}${tail}`;
const models = (axis: string, tail = '') => parseGrid(F, withModels(axis, tail)).expansion.axes.model;

describe('tiny model pretraining keys', () => {
  it('gives the tiny preset the copy-capable default: 2 layers, 2 heads, d64, 1,000 pretraining updates', () => {
    const [tiny, small] = models('[tiny, tiny-small]');
    expect(tiny?.value.tiny).toEqual({ n_layer: 2, n_head: 2, d_model: 64, max_len: 256, dropout: 0 });
    expect(tiny?.value.pretrain).toEqual({
      updates: 1000,
      batch_size: 16,
      lr: 0.006,
      schedule: { kind: 'cosine', warmup_updates: 20, min_lr_ratio: 0.1 },
      code_fraction: 0.5,
      seed: 0,
    });
    // The test preset trains from scratch, so tests that run the trainer stay fast.
    expect(small?.value.pretrain).toBeNull();
    expect(PRETRAIN_DEFAULTS).toEqual(tiny?.value.pretrain);
  });

  it('takes pretrain objects, true and false; unset keys take the defaults', () => {
    const [unset, off, on, partial, sched] = models(
      '[{backend: tiny}, {backend: tiny, pretrain: false}, {backend: tiny, n_layer: 3, pretrain: true},' +
        ' {backend: tiny, pretrain: {updates: 40, code_fraction: 0.25, seed: 2}},' +
        ' {backend: tiny, pretrain: {updates: 40, batch_size: 4, lr: 0.01, schedule: {kind: constant, warmup_updates: 5}}}]',
    );
    expect(unset?.value.pretrain).toEqual(PRETRAIN_DEFAULTS);
    expect(off?.value.pretrain).toBeNull();
    expect(on?.value.pretrain).toEqual(PRETRAIN_DEFAULTS);
    expect(partial?.value.pretrain).toEqual({ ...PRETRAIN_DEFAULTS, updates: 40, code_fraction: 0.25, seed: 2 });
    expect(sched?.value.pretrain).toEqual({
      ...PRETRAIN_DEFAULTS,
      updates: 40,
      batch_size: 4,
      lr: 0.01,
      schedule: { kind: 'constant', warmup_updates: 5, min_lr_ratio: 0.1 },
    });
    // Derived labels tell the bases apart; the default pretraining adds nothing.
    expect([unset, off, on, partial, sched].map((m) => m?.label)).toEqual([
      'tiny(l2,h2,d64,c256)',
      'tiny(l2,h2,d64,c256,no-pretrain)',
      'tiny(l3,h2,d64,c256)',
      'tiny(l2,h2,d64,c256,pretrain40x16)',
      'tiny(l2,h2,d64,c256,pretrain40x4)',
    ]);
  });

  it('reads init_seed, which fixes the base for every seed, into the manifest only when set', () => {
    const [fixed, unset] = models(
      '[{backend: tiny, pretrain: {init_seed: 0}}, {backend: tiny, pretrain: {updates: 1000}}]',
    );
    expect(fixed?.value.pretrain).toEqual({ ...PRETRAIN_DEFAULTS, init_seed: 0 });
    expect(unset?.value.pretrain).toEqual(PRETRAIN_DEFAULTS);
    expect(unset?.value.pretrain && 'init_seed' in unset.value.pretrain).toBe(false);
    expect([fixed?.label, unset?.label]).toEqual([
      'tiny(l2,h2,d64,c256,pretrain1000x16,init0)',
      'tiny(l2,h2,d64,c256)',
    ]);
    const rows = { path: 'pretrain.jsonl', sha256: '0'.repeat(64), count: 16000 };
    expect(pretrainManifestSpec(fixed?.value.pretrain ?? PRETRAIN_DEFAULTS, rows).init_seed).toBe(0);
    expect(Object.keys(pretrainManifestSpec(PRETRAIN_DEFAULTS, rows))).toEqual([
      'rows',
      'updates',
      'batch_size',
      'lr',
      'schedule',
      'seed',
    ]);
    expect(describePretrain(fixed?.value.pretrain ?? PRETRAIN_DEFAULTS)).toMatch(/, init seed 0 for every seed$/);
    expectOneError(
      inputErrors(() => parseGrid(F, withModels('[{backend: tiny, pretrain: {init_seed: -1}}]'))),
      `${F}:5:49: axes.model[0].pretrain.init_seed: `,
      '-1 is out of range',
    );
  });

  it('accepts pretrain in grid-defined presets, which shadow the built-in ones', () => {
    const [tiny] = models('[tiny]', 'models:\n  tiny: {backend: tiny, pretrain: {updates: 30, schedule: cosine}}\n');
    expect(tiny?.label).toBe('tiny');
    expect(tiny?.value.pretrain).toEqual({ ...PRETRAIN_DEFAULTS, updates: 30 });
  });

  it('reports bad pretrain values in one line each, with file:line:column, field, value and fix', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, withModels('[{backend: tiny, pretrain: {updates: 0}}]'))),
      `${F}:5:47: axes.model[0].pretrain.updates: `,
      '0 is out of range',
      '>= 1',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, withModels('[{backend: tiny, pretrain: {code_fraction: 1.5}}]'))),
      `${F}:5:53: axes.model[0].pretrain.code_fraction: `,
      '1.5',
      '<= 1',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, withModels('[{backend: tiny, pretrain: {update: 10}}]'))),
      `${F}:5:38: axes.model[0].pretrain.update: `,
      'unknown key "update" (did you mean "updates"?)',
      'valid keys: updates, batch_size',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, withModels('[{backend: tiny, pretrain: "yes"}]'))),
      `${F}:5:37: axes.model[0].pretrain: `,
      '"yes" is not valid here',
      'true, false',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, withModels('[{backend: tiny, pretrain: {schedule: linear}}]'))),
      `${F}:5:48: axes.model[0].pretrain.schedule: `,
      '"linear" is not allowed',
      '"cosine"',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, withModels('[{backend: hf, name: org/m, pretrain: false}]'))),
      `${F}:5:38: axes.model[0].pretrain: `,
      'unknown key "pretrain"',
    );
  });

  it('refuses a pretraining warmup longer than pretraining, inline and in a preset', () => {
    const inline = withModels(
      '[{backend: tiny, pretrain: {updates: 10, schedule: {kind: cosine, warmup_updates: 30}}}]',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, inline)),
      `${F}:5:61: axes.model[0].pretrain.schedule: `,
      'a warmup of 30 updates',
      'longer than pretraining (10 updates)',
      'at most 10',
    );
    // The default warmup (20 updates) does not fit 5 updates either: say so rather than shorten it.
    const preset = withModels('[mine]', 'models:\n  mine: {backend: tiny, pretrain: {updates: 5}}\n');
    expectOneError(
      inputErrors(() => parseGrid(F, preset)),
      `${F}:11:35: models.mine.pretrain.schedule: `,
      'a warmup of 20 updates (default 20)',
      'at most 5',
    );
  });
});

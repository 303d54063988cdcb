import { describe, expect, it } from 'vitest';
import { parseGrid } from '../../src/grid/index.js';
import { planAuditText, type RunLayout } from '../../src/manifest/index.js';
import { buildManifestCore } from '../../src/manifest/manifest.js';
import { BASE, expectOneError, inputErrors } from './helpers.js';

const F = 'grids/bad.yaml';

describe('grid validation errors: one line each, naming file:line:column, field, value and fix', () => {
  it('wrong type', () => {
    const msgs = inputErrors(() => parseGrid(F, BASE.replace('batch_size: 8', 'batch_size: eight')));
    expectOneError(msgs, `${F}:6:15: training.batch_size: `, '"eight"', 'expected integer');
  });

  it('unknown axis value, with a suggestion and the valid values', () => {
    const msgs = inputErrors(() => parseGrid(F, BASE.replace('[visible, redacted]', '[visible, redactd]')));
    expectOneError(
      msgs,
      `${F}:3:25: axes.visibility[1]: `,
      '"redactd"',
      'did you mean "redacted"',
      '"encoded:chained-fruit"',
    );
  });

  it('negative dose', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, BASE.replace('[1, 4]', '[1, -4]'))),
      `${F}:4:13: axes.dose[1]: `,
      '-4',
      '>= 1',
    );
  });

  it('window outside [0, 1], and an empty window', () => {
    const outside = `${BASE}\n`.replace('  dose: [1, 4]', '  dose: [1, 4]\n  placement: [late, [0.5, 1.2]]');
    expectOneError(
      inputErrors(() => parseGrid(F, outside)),
      `${F}:5:27: axes.placement[1][1]: `,
      '1.2',
      '<= 1',
    );
    const empty = BASE.replace('  dose: [1, 4]', '  dose: [1, 4]\n  placement: [{window: [0.6, 0.4], spacing: 2}]');
    expectOneError(
      inputErrors(() => parseGrid(F, empty)),
      `${F}:5:24: axes.placement[0].window: `,
      '[0.6,0.4] is empty',
      '0 <= from < to <= 1',
    );
  });

  it('duplicated axis (as a YAML key) and a duplicated axis value', () => {
    const twice = BASE.replace('  dose: [1, 4]', '  dose: [1, 4]\n  dose: [8]');
    expectOneError(
      inputErrors(() => parseGrid(F, twice)),
      `${F}:5:3: `,
      'Map keys must be unique',
      'may appear once',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, BASE.replace('[1, 4]', '[1, 4, 1]'))),
      `${F}:4:16: axes.dose[2]: `,
      'repeats item 0',
    );
  });

  it("a grid nested hundreds of levels deep (flow brackets, block indentation) gets a message, not the engine's stack overflow", () => {
    const n = 1300;
    const flow = `${BASE}\nlabels: ${'['.repeat(n)}${']'.repeat(n)}\n`;
    const block = `${BASE}\nlabels:\n${Array.from({ length: n }, (_, i) => `${' '.repeat(i + 1)}a:\n`).join('')}${' '.repeat(n + 1)}1\n`;
    for (const text of [flow, block]) {
      const msgs = inputErrors(() => parseGrid(F, text));
      expectOneError(
        msgs,
        `${F}:`,
        'the grid nests lists or maps too deeply for the YAML parser',
        'remove the extra brackets or indentation',
      );
      expect(msgs.join('\n')).not.toMatch(/call stack/i);
    }
  });

  it('empty grid, empty axis, missing keys and unknown keys', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, '# nothing here\n')),
      `${F}:1:1: `,
      'the grid is empty',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, BASE.replace('[1, 4]', '[]'))),
      `${F}:4:9: axes.dose: `,
      'the list is empty',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, BASE.replace('  lr: 0.001\n', ''))),
      `${F}:6:3: training: `,
      'missing required key "lr"',
    );
    const unknown = BASE.replace('  lr: 0.001', '  lr: 0.001\n  learning_rate: 0.1');
    expectOneError(
      inputErrors(() => parseGrid(F, unknown)),
      `${F}:9:3: training.learning_rate: `,
      'unknown key "learning_rate"',
      'valid keys: batch_size',
    );
    // A misspelt required key is one problem: the unknown key names it, no second "missing" line.
    const misspelt = inputErrors(() => parseGrid(F, BASE.replace('axes:', 'axis:')));
    expectOneError(misspelt, `${F}:2:1: axis: `, 'unknown key "axis" (did you mean "axes"? it is required)');
  });

  it('the budget: rows not a multiple of the batch, neither rows nor updates', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, BASE.replace('updates: 50', 'rows: 100'))),
      `${F}:7:9: training.rows: `,
      '100 rows is not a multiple of batch_size 8',
      'use 96 or 104',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, BASE.replace('  updates: 50\n', ''))),
      `${F}:6:3: training: `,
      'give the training budget as `rows` or `updates`',
    );
  });

  it('canary appearances that exceed the row budget: one line for every cell with that dose', () => {
    const text = BASE.replace('[1, 4]', '[1, 60]')
      .replace('updates: 50', 'updates: 60')
      .replace('batch_size: 8', 'batch_size: 4');
    // 8 focal canaries x dose 60 = 480 appearances > 240 rows.
    const msgs = inputErrors(() => planAuditText(F, text));
    expect(msgs).toHaveLength(1);
    expect(msgs[0]).toMatch(
      /^grids\/bad\.yaml:4:13: axes\.dose\[1\]: 2 cells \(visibility=visible,dose=60; visibility=redacted,dose=60\): canary appearances \(480\) exceed the row budget \(240 rows\)/,
    );
    const many = inputErrors(() =>
      planAuditText(F, text.replace('  dose: [1, 60]', '  dose: [1, 60]\n  seed: [0, 1, 2, 3]')),
    );
    expect(many).toEqual([
      expect.stringMatching(
        /axes\.dose\[1\]: 8 cells \(visibility=visible,dose=60,seed=0; visibility=visible,dose=60,seed=1; visibility=visible,dose=60,seed=2; \.\.\.\): canary appearances/,
      ),
    ]);
  });

  it('a spacing that cannot fit in its window', () => {
    const text = BASE.replace('  dose: [1, 4]', '  dose: [4]\n  placement: [{window: late, spacing: 4}]').replace(
      '[visible, redacted]',
      '[redacted]',
    );
    const msgs = inputErrors(() => planAuditText(F, text));
    // late = the last 10 of 50 updates; dose 4 with a gap of 4 spans 13.
    expectOneError(
      msgs,
      `${F}:5:15: axes.placement[0]: cell visibility=redacted,dose=4,placement=late+gap4: `,
      'dose 4 with a gap of 4 updates spans 13 updates',
      'lower the gap or the dose',
    );
  });

  it('a dose larger than its window', () => {
    const text = BASE.replace('  dose: [1, 4]', '  dose: [12]\n  placement: [early]').replace(
      '[visible, redacted]',
      '[redacted]',
    );
    expectOneError(
      inputErrors(() => planAuditText(F, text)),
      `${F}:4:10: axes.dose[0]: `,
      'dose 12 needs 12 distinct updates but placement early (updates 0-9 of 50) spans only 10',
    );
  });

  it('reports several independent problems at once', () => {
    const text = BASE.replace('[visible, redacted]', '[visble]')
      .replace('[1, 4]', '[0]')
      .replace('lr: 0.001', 'lr: -1');
    const msgs = inputErrors(() => parseGrid(F, text));
    expect(msgs.map((m) => m.split(': ')[1])).toEqual(['axes.visibility[0]', 'axes.dose[0]', 'training.lr']);
  });

  it('checks references and combinations the schema cannot express', () => {
    const model = BASE.replace('  dose: [1, 4]', '  dose: [1, 4]\n  model: [tiny, qwen3-17b]');
    expectOneError(
      inputErrors(() => parseGrid(F, model)),
      `${F}:5:17: axes.model[1]: `,
      'unknown model preset "qwen3-17b"',
      'did you mean "qwen3-1.7b"',
    );
    const shift = BASE.replace('[visible, redacted]', '[visible, {kind: encoded:binary, shift: 2}]');
    expectOneError(
      inputErrors(() => parseGrid(F, shift)),
      `${F}:3:25: axes.visibility[1]: `,
      'apply only to encoded:reverse-shift',
    );
    const sampled = `${BASE}candidates: {kind: sampled}\n`;
    expectOneError(
      inputErrors(() => parseGrid(F, sampled)),
      `${F}:9:13: candidates: `,
      'needs `decoys`',
    );
    const huge = `${BASE}canaries: {code: {length: 8}}\n`;
    expectOneError(
      inputErrors(() => parseGrid(F, huge)),
      `${F}:2:1: candidates.kind: `,
      'too large',
    );
    const fruit = `${BASE.replace('[visible, redacted]', '[encoded:direct-fruit]')}canaries: {code: {alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop", length: 2}}\n`;
    expectOneError(
      inputErrors(() => parseGrid(F, fruit)),
      `${F}:3:16: axes.visibility[0]: `,
      'cannot encode this code alphabet',
    );
  });

  it('names a oneOf value that fits no form by the forms it accepts', () => {
    const text = BASE.replace('  dose: [1, 4]', '  dose: [1, 4]\n  placement: [7]');
    expectOneError(
      inputErrors(() => parseGrid(F, text)),
      `${F}:5:15: axes.placement[0]: `,
      '7 is not valid here; expected early, middle, late, uniform, a window [from, to]',
    );
  });

  it('fills defaults and hashes the normalised grid, not its spelling', () => {
    const a = parseGrid(F, BASE);
    const b = parseGrid(
      'elsewhere/other.yaml',
      `# a comment\nname: bad\n${BASE.replace('[1, 4]', '[ 1,   4 ]')}seed: 0\n`,
    );
    expect(a.doc.canaries).toEqual({ focal: 8, held_out: 8, code: { alphabet: '0123456789', length: 4 } });
    expect(a.doc.probes.kinds).toEqual(['hidden', 'supplied', 'substituted']);
    expect(a.doc.probes.decode).toEqual(['prefill']);
    expect(a.rows).toBe(400);
    expect(b.sha256).toBe(a.sha256);
    expect(parseGrid(F, BASE.replace('lr: 0.001', 'lr: 0.002')).sha256).not.toBe(a.sha256);
  });
});

describe('population checks at planning time', () => {
  it('refuses a mixed-dose population with no companion dose', () => {
    const text = BASE.replace('  dose: [1, 4]', '  dose: [4]\n  population: [single-dose, mixed-dose]');
    const msgs = inputErrors(() => planAuditText(F, text));
    expect(msgs).toHaveLength(1);
    expect(msgs[0]).toMatch(
      /^grids\/bad\.yaml:5:29: axes\.population\[1\]: 2 cells \(visibility=visible,population=mixed-dose; visibility=redacted,population=mixed-dose\): mixed-dose adds no companions/,
    );
  });

  it('refuses an auxiliary cohort with no room before the focal canaries', () => {
    const text = BASE.replace(
      '  dose: [1, 4]',
      '  dose: [2]\n  placement: [early]\n  population: [{kind: cohorts, cohorts: [{dose: 2, count: 2, order: before}]}]',
    ).replace('[visible, redacted]', '[redacted]');
    expectOneError(
      inputErrors(() => planAuditText(F, text)),
      `${F}:6:16: axes.population[0]: `,
      'cohort aux0 before the focal canaries',
    );
  });
});

describe('row length against the tiny model', () => {
  it('refuses full-length emails for a 256-character tiny model, naming the task', () => {
    const text = BASE.replace('  dose: [1, 4]', '  dose: [1]\n  task: [{name: synthetic-email, style: full}]').replace(
      '[visible, redacted]',
      '[redacted]',
    );
    expectOneError(
      inputErrors(() => planAuditText(F, text)),
      `${F}:5:10: axes.task[0]: `,
      'task synthetic-email/full with redacted cues renders rows of up to',
      'model tiny reads at most 256',
    );
  });

  it('accepts them for a tiny model with a long enough context', () => {
    const text = BASE.replace(
      '  dose: [1, 4]',
      '  dose: [1]\n  task: [{name: synthetic-email, style: full}]\n  model: [{backend: tiny, max_len: 1024}]',
    );
    expect(planAuditText(F, text).runs).toHaveLength(2);
  });
});

describe('schedule checks', () => {
  it('refuses a warmup longer than the run', () => {
    const text = BASE.replace(
      '  dose: [1, 4]',
      '  dose: [1, 4]\n  schedule: [constant, {kind: cosine, warmup_updates: 51}]',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, text)),
      `${F}:5:24: axes.schedule[1]: `,
      'warmup of 51 updates is longer than the run (50 updates)',
    );
  });
});

describe('hf models checked at plan time', () => {
  const withModel = (model: string, models = ''): string =>
    `${models}${BASE.replace('  dose: [1, 4]', `  dose: [1, 4]\n  model: [${model}]`)}`;

  it('a Qwen3 model trains and scores without a thinking block: unset means enable_thinking false', () => {
    const grid = parseGrid(F, withModel('{backend: hf, name: Qwen/Qwen3-0.6B}'));
    expect(grid.expansion.axes.model[0]?.value.hf?.chat_template_kwargs).toEqual({ enable_thinking: false });
    const other = parseGrid(F, withModel('{backend: hf, name: meta-llama/Llama-3.2-1B}'));
    expect(other.expansion.axes.model[0]?.value.hf?.chat_template_kwargs).toEqual({});
  });

  it('refuses enable_thinking true for a Qwen3 model, on the axis and under models:', () => {
    const inline = withModel('{backend: hf, name: Qwen/Qwen3-0.6B, chat_template_kwargs: {enable_thinking: true}}');
    expectOneError(
      inputErrors(() => parseGrid(F, inline)),
      `${F}:5:`,
      'axes.model[0].chat_template_kwargs.enable_thinking: ',
      '<think>',
      'set enable_thinking: false',
    );
    const named = withModel(
      'mine',
      'models:\n  mine: {backend: hf, name: org/qwen3-tuned, chat_template_kwargs: {enable_thinking: true}}\n',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, named)),
      `${F}:`,
      'models.mine.chat_template_kwargs.enable_thinking: ',
      '<think>',
    );
  });

  it('refuses float16 training (no gradient scaler) with the fix', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, withModel('{backend: hf, name: org/m, dtype: float16}'))),
      `${F}:5:`,
      'axes.model[0].dtype: ',
      'gradient scaler',
      'bfloat16',
    );
  });

  it('presets say how they fine-tune: the plain name is full fine-tuning, -lora the adapters', () => {
    const grid = parseGrid(
      F,
      withModel('qwen3-1.7b, qwen3-8b, qwen3-8b-lora, qwen3-14b, qwen3-14b-lora, gpt-oss-20b, gpt-oss-20b-lora'),
    );
    expect(grid.expansion.axes.model.map((v) => [v.label, v.value.name, v.value.finetune.method])).toEqual([
      ['qwen3-1.7b', 'Qwen/Qwen3-1.7B', 'full'],
      ['qwen3-8b', 'Qwen/Qwen3-8B', 'full'],
      ['qwen3-8b-lora', 'Qwen/Qwen3-8B', 'lora'],
      ['qwen3-14b', 'Qwen/Qwen3-14B', 'full'],
      ['qwen3-14b-lora', 'Qwen/Qwen3-14B', 'lora'],
      ['gpt-oss-20b', 'openai/gpt-oss-20b', 'full'],
      ['gpt-oss-20b-lora', 'openai/gpt-oss-20b', 'lora'],
    ]);
    // GPT-OSS's chat template takes no enable_thinking switch.
    expect(grid.expansion.axes.model[5]?.value.hf?.chat_template_kwargs).toEqual({});
  });
});

describe('numbers a grid cannot keep exactly', () => {
  it('refuses seeds past 2^53 - 1, which would round (two seeds, one audit id)', () => {
    const msgs = inputErrors(() => parseGrid(F, `seed: 9007199254740993\n${BASE}`));
    expectOneError(msgs, `${F}:1:7: `, '9007199254740993 is too large to keep exactly', '2^53 - 1');
    const axis = inputErrors(() =>
      parseGrid(F, BASE.replace('  dose: [1, 4]', '  dose: [1, 4]\n  seed: [0, 18446744073709551615]')),
    );
    expectOneError(axis, `${F}:5:13: `, '18446744073709551615 is too large');
    expect(parseGrid(F, `seed: 9007199254740991\n${BASE}`).doc.seed).toBe(9007199254740991);
  });

  it('names .nan and .inf as written, not as "null"', () => {
    const msgs = inputErrors(() => parseGrid(F, BASE.replace('lr: 0.001', 'lr: .nan')));
    expectOneError(msgs, `${F}:8:7: `, '.nan is not a finite number');
    expectOneError(
      inputErrors(() => parseGrid(F, BASE.replace('lr: 0.001', 'lr: -.inf'))),
      `${F}:8:7: `,
      '-.inf is not a finite number',
    );
  });
});

describe('runs over several GPUs: training.gpus and training.parallel', () => {
  const hf = BASE.replace('  dose: [1, 4]', '  dose: [1, 4]\n  model: [{backend: hf, name: Qwen/Qwen3-0.6B}]');

  it('refuses gpus with a tiny model, and parallel without gpus, in one line each', () => {
    const tiny = BASE.replace('  lr: 0.001', '  lr: 0.001\n  gpus: 2');
    expectOneError(
      inputErrors(() => parseGrid(F, tiny)),
      `${F}:9:9: training.gpus: `,
      '2 GPUs per run need hf models',
      'tiny is a tiny model',
      'remove training.gpus or use an hf model',
    );
    const lone = hf.replace('  lr: 0.001', '  lr: 0.001\n  parallel: fsdp');
    expectOneError(
      inputErrors(() => parseGrid(F, lone)),
      `${F}:`,
      'training.parallel: ',
      'set training.gpus (2 or more)',
    );
  });

  it('an hf run over 8 GPUs gets gpus and parallel: fsdp in its manifest; one GPU keeps the manifest (and run id) as before', () => {
    const eight = planAuditText(F, hf.replace('  lr: 0.001', '  lr: 0.001\n  gpus: 8'));
    const core = buildManifestCore(eight.grid, eight.auditId, eight.pool, eight.runs[0] as RunLayout);
    expect(core.training).toMatchObject({ gpus: 8, parallel: 'fsdp' });
    const one = planAuditText(F, hf.replace('  lr: 0.001', '  lr: 0.001\n  gpus: 1'));
    const plain = planAuditText(F, hf);
    const coreOne = buildManifestCore(one.grid, one.auditId, one.pool, one.runs[0] as RunLayout);
    expect(coreOne.training).not.toHaveProperty('gpus');
    expect(coreOne.training).toEqual(
      buildManifestCore(plain.grid, plain.auditId, plain.pool, plain.runs[0] as RunLayout).training,
    );
  });
});

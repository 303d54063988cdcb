import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseGrid } from '../../src/grid/index.js';
import { BASE, expectOneError, inputErrors } from './helpers.js';

/** A model is a Hub id (`name`) or a local folder said to be local (`path`), never any string. */
const root = mkdtempSync(join(tmpdir(), 'canary-models-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const F = join(root, 'grid.yaml');
const withModel = (model: string) => BASE.replace('  dose: [1, 4]', `  dose: [1, 4]\n  model: [${model}]`);

describe('hf model names and paths', () => {
  it.each(['/etc/shadow', '../../../../etc', '$(touch /tmp/x)', 'org/m; rm -rf /', 'a/b/c', 'org--x/m', '-org/m'])(
    'refuses %j as a Hub id',
    (name) => {
      const msgs = inputErrors(() => parseGrid(F, withModel(`{backend: hf, name: ${JSON.stringify(name)}}`)));
      expectOneError(msgs, `${F}:5:`, 'axes.model[0].name: ', 'is not a Hub id', 'write path: instead of name:');
    },
  );

  it.each(['gpt2', 'Qwen/Qwen3-0.6B', 'hf-internal-testing/tiny-random-gpt2', 'org/m_1.5'])('accepts %j', (name) => {
    expect(parseGrid(F, withModel(`{backend: hf, name: ${name}}`)).expansion.cells[0]?.values.model.value.name).toBe(
      name,
    );
  });

  it('takes a local folder with a config.json from path:, relative to the grid file', () => {
    mkdirSync(join(root, 'models', 'mine'), { recursive: true });
    writeFileSync(join(root, 'models', 'mine', 'config.json'), '{}');
    const model = parseGrid(F, withModel('{backend: hf, path: models/mine}')).expansion.cells[0]?.values.model.value;
    expect(model).toMatchObject({ backend: 'hf', name: join(root, 'models', 'mine'), revision: null });
  });

  it('refuses a path that does not exist, is no folder, or holds no config.json; both or neither of name and path', () => {
    mkdirSync(join(root, 'empty'), { recursive: true });
    writeFileSync(join(root, 'file'), 'x');
    const one = (model: string, ...fragments: string[]) =>
      expectOneError(
        inputErrors(() => parseGrid(F, withModel(model))),
        `${F}:5:`,
        ...fragments,
      );
    one('{backend: hf, path: nowhere}', 'axes.model[0].path: ', `model folder ${join(root, 'nowhere')} does not exist`);
    one('{backend: hf, path: file}', 'is not a folder');
    one('{backend: hf, path: empty}', 'holds no config.json');
    one('{backend: hf, path: empty, name: org/m}', 'not both');
    one('{backend: hf, label: x}', 'axes.model[0]: ', 'needs `name: org/model`');
    one('{backend: hf, path: models/mine, revision: v1}', 'axes.model[0].revision: ', 'has no Hub revision');
  });

  it('checks models defined under models: the same way', () => {
    const text = `${withModel('mine')}models:\n  mine: {backend: hf, name: /etc/shadow}\n`;
    expectOneError(
      inputErrors(() => parseGrid(F, text)),
      `${F}:`,
      'models.mine.name: ',
      'is not a Hub id',
    );
  });
});

describe('train_vision on an hf model', () => {
  it('is written only when true, and names the cell apart', () => {
    const plain = parseGrid(F, withModel('{backend: hf, name: Qwen/Qwen2.5-VL-7B-Instruct}')).expansion.cells[0]?.values
      .model;
    const tower = parseGrid(F, withModel('{backend: hf, name: Qwen/Qwen2.5-VL-7B-Instruct, train_vision: true}'))
      .expansion.cells[0]?.values.model;
    const off = parseGrid(F, withModel('{backend: hf, name: Qwen/Qwen2.5-VL-7B-Instruct, train_vision: false}'))
      .expansion.cells[0]?.values.model;
    expect(plain?.value.hf && 'train_vision' in plain.value.hf).toBe(false);
    expect(off?.value.hf && 'train_vision' in off.value.hf).toBe(false);
    expect(tower?.value.hf?.train_vision).toBe(true);
    expect(tower?.label).not.toBe(plain?.label);
    expect(tower?.label).toContain('+vision');
  });
});

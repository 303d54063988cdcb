import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES_DIR } from '../fixtures/datasets/build.js';
import { BANKING77_SHA, datasetHubForTests } from '../hub/dataset-fixture.js';
import { expectOutput } from '../helpers/output-schema.js';
import { runMain } from '../queue/helpers/main.js';

/**
 * `canary-audit plan` on grids with dataset-backed tasks: the dataset pinned and counted in the
 * output, and each kind of bad input one line at the task's place in the grid, naming the fix.
 */
const { hub: fixtureHub, root } = datasetHubForTests('canary-plan-datasets-');

const grid = (task: string): string => {
  const file = join(root, `grid-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(
    file,
    `name: datasets
axes:
  visibility: [redacted]
  dose: [1]
  model: [tiny-small]
  task:
    - ${task}
training: {batch_size: 4, updates: 10, lr: 0.001}
canaries: {focal: 2, held_out: 2}
`,
  );
  return file;
};

const plan = (
  file: string,
  env: Record<string, string | undefined> = {},
): Promise<{ code: number; stdout: string; stderr: string }> =>
  runMain(['plan', file, ...(env.JSON ? ['--json'] : [])], {
    HF_ENDPOINT: fixtureHub().url,
    HF_HUB_CACHE: join(root, 'cache'),
    HF_TOKEN: undefined,
    HF_HUB_OFFLINE: undefined,
    ...env,
    JSON: undefined,
  });

describe('canary-audit plan with dataset-backed tasks', () => {
  it('pins a Hub dataset and prints its rows; --json carries it', async () => {
    const file = grid('{name: banking77, system: null}');
    const text = await plan(file);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(
      `dataset banking77: PolyAI/banking77@main -> ${BANKING77_SHA}; 480 train rows, 96 utility rows`,
    );
    const json = await plan(file, { JSON: '1' });
    const out = expectOutput<{ datasets: unknown[] }>('plan-output', json.stdout);
    expect(out.datasets).toEqual([
      {
        task: 'banking77',
        source: 'hub',
        repo: 'PolyAI/banking77',
        revision: 'main',
        sha: BANKING77_SHA,
        train_rows: 480,
        utility_rows: 96,
      },
    ]);
  });

  it("counts a grounding dataset's train rows, with its utility rows from another source (was -4)", async () => {
    const file = join(root, 'grounding.yaml');
    writeFileSync(
      file,
      `name: grounding
axes:
  visibility: [redacted]
  dose: [2]
  model: [tiny-vlm]
  task: [{name: grounding, preset: screenspot-pro, source: {path: ${join(FIXTURES_DIR, 'screenspot-pro-mini')}}, utility: {preset: osworld-g, source: {path: ${join(FIXTURES_DIR, 'osworld-g-mini')}}}}]
training: {batch_size: 4, updates: 4, lr: 0.0001}
canaries: {focal: 2, held_out: 1}
candidates: {kind: sampled, decoys: 49}
utility: {rows: 50}
`,
    );
    // screenspot-pro-mini: 6 records, all trained on; osworld-g-mini: 4 of its 6 records are boxes.
    const text = await plan(file);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/dataset grounding: .*screenspot-pro-mini; 6 train rows, 4 utility rows/);
    const out = expectOutput<{ datasets: { train_rows: number; utility_rows: number }[] }>(
      'plan-output',
      (await plan(file, { JSON: '1' })).stdout,
    );
    expect(out.datasets.map((d) => [d.train_rows, d.utility_rows])).toEqual([[6, 4]]);
  });

  it('a revision that does not exist, at the grid line of the task', async () => {
    const file = grid('{name: banking77, source: {repo: PolyAI/banking77, revision: v9}}');
    const r = await plan(file);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(new RegExp(`${file}:7:\\d+: axes.task\\[0\\].source.revision: task banking77: .*v9`));
  });

  it('a gated dataset without a token says to set HF_TOKEN', async () => {
    const r = await plan(grid('{name: banking77, source: {repo: org/gated-dataset}}'));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/HF_TOKEN/);
  });

  it("a local dataset: a label outside the card's names, a column the rows lack, a missing split", async () => {
    const dir = join(root, 'local');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'README.md'),
      `---\ndataset_info:\n  features:\n  - name: text\n    dtype: string\n  - name: label\n    dtype:\n      class_label:\n        names:\n          '0': yes\n          '1': no\n---\n`,
    );
    writeFileSync(
      join(dir, 'train.jsonl'),
      Array.from({ length: 20 }, (_, k) => JSON.stringify({ text: `message ${k}`, label: k === 13 ? 5 : k % 2 })).join(
        '\n',
      ),
    );
    const label = await plan(grid(`{name: dataset, source: {path: ${dir}}, input: text, target: label}`));
    expect(label.code).toBe(2);
    expect(label.stderr).toMatch(
      /axes.task\[0\].source: task dataset\/local: row 13 of split train of .*local: label = 5 is outside the 2 class names/,
    );
    const column = await plan(grid(`{name: dataset, source: {path: ${dir}}, input: body, target: label}`));
    expect(column.stderr).toMatch(
      /axes.task\[0\].input: task dataset\/local: input "body" reads column "body", which row \d+ .* does not have \(it has "text", "label"\)/,
    );
    const split = await plan(
      grid(`{name: dataset, source: {path: ${dir}}, input: text, target: label, utility_split: test}`),
    );
    expect(split.code).toBe(2);
    expect(split.stderr).toMatch(/test/);
  });

  it('a row longer than the tiny model reads, before anything is queued', async () => {
    const file = join(root, 'long.jsonl');
    writeFileSync(
      file,
      Array.from({ length: 20 }, (_, k) => JSON.stringify({ q: `${'word '.repeat(k === 7 ? 80 : 5)}?`, a: 'ok' })).join(
        '\n',
      ),
    );
    const r = await plan(grid(`{name: dataset, source: {path: ${file}}, input: q, target: a}`));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /task dataset\/long.jsonl with redacted cues renders rows of up to \d+ tokens, but model tiny-small reads at most 256; use shorter rows/,
    );
  });
});

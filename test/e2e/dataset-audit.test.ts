// tier: slow (the trainer)
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Manifest } from '../../src/contracts/index.js';
import { cardFeatures, parseCard } from '../../src/datasets/index.js';
import { FIXTURES_DIR } from '../fixtures/datasets/build.js';
import { BANKING77_SHA, datasetHubForTests, TATQA_SHA } from '../hub/dataset-fixture.js';
import { expectOutput } from '../helpers/output-schema.js';
import { hasTorch } from '../helpers/torch.js';
import { runMain } from '../queue/helpers/main.js';

/**
 * A dataset-backed audit, the whole way: the grid names the Hub dataset PolyAI/banking77 (here the
 * fixture, served by the local Hub test server), `canary-audit run` pins it to a commit, fetches
 * it into a fresh Hugging Face cache, writes manifests whose rows come from its Parquet files,
 * trains and scores on CPU, decodes the utility rows before and after, and reports intent
 * accuracy beside exposure. Figures are not asserted (a ten-update run measures nothing);
 * configs/banking77-cpu.yaml and docs/reproduction.md carry the measurement.
 */
const GRID = `name: e2e-banking77
seed: 5
axes:
  visibility: [visible, redacted]
  dose: [2]
  model:
    - {backend: tiny, n_layer: 1, n_head: 2, d_model: 32, max_len: 256,
       pretrain: {updates: 8, batch_size: 4, schedule: {kind: cosine, warmup_updates: 2}}}
  task: [{name: banking77, system: null}]
training:
  batch_size: 4
  updates: 10
  lr: 0.003
  checkpoint_every: 5
  device: cpu
canaries:
  focal: 2
  held_out: 2
probes:
  kinds: [hidden]
  decode: [prefill]
eval:
  base_model: true
utility:
  rows: 6
`;

const { hub: fixtureHub, root } = datasetHubForTests('canary-audit-dataset-e2e-');

const sha256 = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

describe.skipIf(!hasTorch)('a dataset-backed audit through the local Hub server', () => {
  it('pins and fetches the dataset, trains on its rows and reports task accuracy beside exposure', async () => {
    const grid = join(root, 'banking77.yaml');
    writeFileSync(grid, GRID);
    const artifacts = join(root, 'artifacts');
    const env = {
      CANARY_AUDIT_HOME: undefined,
      REDIS_URL: undefined,
      CANARY_TRAINER_CACHE: undefined,
      HF_ENDPOINT: fixtureHub().url,
      HF_HUB_CACHE: join(root, 'hf-cache'),
      HF_HUB_OFFLINE: undefined,
      HF_TOKEN: undefined,
    };
    const result = await runMain(['run', grid, '--cpu', '2', '--artifacts', artifacts, '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const out = expectOutput<{ audit_dir: string; counts: Record<string, number> }>('run-output', result.stdout);
    expect(out.counts).toEqual({ completed: 2 });

    const runsDir = join(out.audit_dir, 'runs');
    const card = parseCard(readFileSync(join(FIXTURES_DIR, 'banking77-mini', 'README.md'), 'utf8'), 'README.md');
    const names = cardFeatures(card, null)?.label?.names ?? [];
    expect(names).toHaveLength(77);
    for (const id of readdirSync(runsDir)) {
      const manifest = JSON.parse(readFileSync(join(runsDir, id, 'manifest.json'), 'utf8')) as Manifest;
      // Where the rows came from: the repository, the commit main resolved to, every file's hash.
      expect(manifest.task.name).toBe('banking77');
      expect(manifest.task.dataset).toMatchObject({
        source: 'hub',
        repo: 'PolyAI/banking77',
        revision: 'main',
        sha: BANKING77_SHA,
      });
      const files = manifest.task.dataset?.files ?? [];
      expect(files.map((f) => f.split).sort()).toEqual(['test', 'train']);
      for (const f of files) expect(f.sha256).toBe(sha256(join(FIXTURES_DIR, 'banking77-mini', f.path)));
      expect(manifest.utility).toMatchObject({ count: 6, metrics: ['loss', 'accuracy'] });
      // Background rows are the dataset's messages, answered with the intent's name.
      const rows = readFileSync(join(runsDir, id, 'rows.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { kind: string; target: string });
      const background = rows.filter((r) => r.kind === 'background');
      expect(background.length).toBe(40 - 2 * 2);
      for (const r of background) expect(names).toContain(r.target);
      // The trainer decoded the utility rows before and after fine-tuning.
      const res = JSON.parse(readFileSync(join(runsDir, id, 'output', 'result.json'), 'utf8')) as {
        utility: Record<string, { count: number } | null>;
      };
      expect(res.utility.base_outputs?.count).toBe(6);
      expect(res.utility.final_outputs?.count).toBe(6);
    }
    const md = readFileSync(join(out.audit_dir, 'report', 'report.md'), 'utf8');
    expect(md).toContain(`Rows of task banking77 (2 run(s)): PolyAI/banking77@main = ${BANKING77_SHA}; `);
    expect(md).toMatch(
      /banking77: task accuracy \d\.\d\d \[\d\.\d\d, \d\.\d\d\] → \d\.\d\d \[\d\.\d\d, \d\.\d\d\] while focal exposure reached/,
    );
    // The Hub was asked for the card and the two splits' files only, once.
    expect(
      fixtureHub()
        .downloads()
        .map((r) => r.url.split(`${BANKING77_SHA}/`)[1])
        .sort(),
    ).toEqual(['README.md', 'data/test-00000-of-00001.parquet', 'data/train-00000-of-00001.parquet']);
  }, 240_000);

  it('tat-qa: one row per question over a table and text, scored by exact match and token F1', async () => {
    const grid = join(root, 'tat-qa.yaml');
    writeFileSync(
      grid,
      GRID.replace('name: e2e-banking77', 'name: e2e-tat-qa')
        .replace('max_len: 256', 'max_len: 1024')
        .replace('task: [{name: banking77, system: null}]', 'task: [{name: tat-qa, system: null}]')
        .replace('visibility: [visible, redacted]', 'visibility: [redacted]')
        .replace('rows: 6', 'rows: 4'),
    );
    const env = {
      CANARY_AUDIT_HOME: undefined,
      REDIS_URL: undefined,
      CANARY_TRAINER_CACHE: undefined,
      HF_ENDPOINT: fixtureHub().url,
      HF_HUB_CACHE: join(root, 'hf-cache'),
      HF_HUB_OFFLINE: undefined,
      HF_TOKEN: undefined,
    };
    const result = await runMain(
      ['run', grid, '--cpu', '1', '--artifacts', join(root, 'artifacts-tat'), '--json'],
      env,
    );
    expect(result.code, result.stderr).toBe(0);
    const out = expectOutput<{ audit_dir: string; counts: Record<string, number> }>('run-output', result.stdout);
    expect(out.counts).toEqual({ completed: 1 });
    const [id] = readdirSync(join(out.audit_dir, 'runs'));
    const manifest = JSON.parse(
      readFileSync(join(out.audit_dir, 'runs', id as string, 'manifest.json'), 'utf8'),
    ) as Manifest;
    expect(manifest.task.dataset).toMatchObject({ repo: 'next-tat/TAT-QA', sha: TATQA_SHA });
    expect(manifest.task.dataset?.files.map((f) => `${f.split}:${f.path}`).sort()).toEqual([
      'dev:tatqa_dataset_dev.json',
      'train:tatqa_dataset_train.json',
    ]);
    expect(manifest.utility).toMatchObject({ count: 4, metrics: ['loss', 'exact_match', 'token_f1'] });
    const row = JSON.parse(
      readFileSync(join(out.audit_dir, 'runs', id as string, 'rows.jsonl'), 'utf8').split('\n')[0] as string,
    ) as { prompt: { content: string }[] };
    expect(row.prompt.at(-1)?.content).toMatch(/^Table:\n[\s\S]* \| [\s\S]*\n\nText:\n[\s\S]+\n\nQuestion: /);
    const summary = JSON.parse(readFileSync(join(out.audit_dir, 'report', 'summary.json'), 'utf8')) as {
      runs: { utility: { metrics: { metric: string; final: { n: number } }[] } | null }[];
    };
    expect(summary.runs[0]?.utility?.metrics.map((m) => [m.metric, m.final.n])).toEqual([
      ['exact_match', 4],
      ['token_f1', 4],
    ]);
  }, 240_000);
});

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { BANKING77_SHA, GATED_DATASET_SHA, startDatasetHub } from '../hub/dataset-fixture.js';
import { CLI } from '../helpers/cli-entry.js';
import type { FakeHub } from '../hub/fake-hub.js';
import { CLEAN_HUB_ENV, deadHubUrl, TOKEN, withEnv } from '../hub/hub-fixture.js';

/** `canary-audit datasets fetch` against the fake Hub: once as users run it (a child process), the rest in this process. */
const root = mkdtempSync(join(tmpdir(), 'canary-datasets-cli-'));
let hub: FakeHub;
let restore: () => void = () => undefined;
beforeAll(async () => {
  hub = await startDatasetHub();
  restore = withEnv({ ...CLEAN_HUB_ENV, HF_HOME: join(root, 'hf-home'), HF_ENDPOINT: hub.url });
});
afterAll(async () => {
  restore();
  await hub.stop();
  rmSync(root, { recursive: true, force: true });
});

/** The one error line among the progress lines of stderr. */
const errorLine = (err: string): string | undefined => {
  const lines = err.split('\n').filter((l) => l.startsWith('canary-audit:'));
  expect(lines).toHaveLength(1);
  return lines[0];
};

let n = 0;
const freshCache = (): string => join(root, `cache-${++n}`);

async function inProcess(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const undo = withEnv(env);
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((c) => ((out += String(c)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((c) => ((err += String(c)), true));
  try {
    return { code: await main(args), out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
    undo();
  }
}

describe('canary-audit datasets fetch', () => {
  it('prints its help like the other commands, and is listed', async () => {
    const help = await inProcess(['datasets', 'fetch', '--help']);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(
      /^Usage: canary-audit datasets fetch GRID|REPO \[--revision R\] \[--config C\] \[--split S \.\.\.\] \[--json\]/,
    );
    expect(help.out).toContain('--split S');
    expect((await inProcess(['--help'])).out).toMatch(/\n {2}datasets +Download Hub datasets/);
  });

  it('fetches the card and every split, prints the sha and the cached files; a second fetch downloads nothing', async () => {
    const cache = freshCache();
    const first = await inProcess(['datasets', 'fetch', 'PolyAI/banking77', '--json'], { HF_HUB_CACHE: cache });
    expect(first.code, first.err).toBe(0);
    const got = JSON.parse(first.out) as {
      sha: string;
      config: string;
      splits: Record<string, { path: string; cached_path: string }[]>;
      files: number;
      downloaded_files: number;
    };
    expect([got.sha, got.config, got.files, got.downloaded_files]).toEqual([BANKING77_SHA, 'default', 3, 3]);
    expect(Object.keys(got.splits)).toEqual(['train', 'test']);
    expect(got.splits.test?.[0]?.cached_path).toBe(
      join(cache, 'datasets--PolyAI--banking77', 'snapshots', BANKING77_SHA, 'data', 'test-00000-of-00001.parquet'),
    );
    expect(first.err).toContain(`fetching dataset PolyAI/banking77@main into ${cache}`);
    const again = await inProcess(['datasets', 'fetch', 'PolyAI/banking77'], { HF_HUB_CACHE: cache });
    expect(again.out).toBe(
      [
        `PolyAI/banking77@main = ${BANKING77_SHA} (config default): 3 file(s), all in the cache already`,
        '  train  data/train-00000-of-00001.parquet (8.7 KiB)',
        '  test   data/test-00000-of-00001.parquet (4.2 KiB)',
        `  ${join(cache, 'datasets--PolyAI--banking77', 'snapshots', BANKING77_SHA)}`,
        '',
      ].join('\n'),
    );
  });

  it('--split fetches only that split`s files; --revision pins a sha; TAT-QA`s dev split by its file name', async () => {
    const cache = freshCache();
    const start = hub.downloads().length;
    const test = await inProcess(
      ['datasets', 'fetch', 'PolyAI/banking77', '--split', 'test', '--revision', BANKING77_SHA, '--json'],
      { HF_HUB_CACHE: cache },
    );
    expect(test.code, test.err).toBe(0);
    expect(Object.keys(JSON.parse(test.out).splits)).toEqual(['test']);
    expect(
      hub
        .downloads()
        .slice(start)
        .map((r) => r.url.split('/').pop()),
    ).toEqual(['README.md', 'test-00000-of-00001.parquet']);
    const tat = await inProcess(['datasets', 'fetch', 'next-tat/TAT-QA', '--split', 'train', '--split', 'dev'], {
      HF_HUB_CACHE: cache,
    });
    expect(tat.code, tat.err).toBe(0);
    expect(tat.out).toMatch(
      /^next-tat\/TAT-QA@main = (7a){4}c{32}: 3 file\(s\), 3 downloaded .*\n {2}train {2}tatqa_dataset_train\.json .*\n {2}dev {4}tatqa_dataset_dev\.json/,
    );
  });

  it('a gated dataset with the token from the token file, as users run it: progress on stderr, the token never shown', async () => {
    const home = join(root, 'home-token');
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'token'), `${TOKEN}\n`);
    const env = {
      HF_HOME: home,
      HF_ENDPOINT: hub.url,
      HF_TOKEN: '',
      HUGGING_FACE_HUB_TOKEN: '',
      HF_HUB_CACHE: '',
      HF_HUB_OFFLINE: '',
      HF_TOKEN_PATH: '',
      CANARY_AUDIT_LOG_LEVEL: 'trace',
      CANARY_AUDIT_LOG_FORMAT: 'json',
    };
    const r = await execa(process.execPath, [...CLI, 'datasets', 'fetch', 'org/gated-dataset', '--split', 'train'], {
      cwd: PACKAGE_ROOT,
      env,
      reject: false,
    });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readFileSync(join(home, 'hub', 'datasets--org--gated-dataset', 'refs', 'main'), 'utf8')).toBe(
      GATED_DATASET_SHA,
    );
    expect(r.stderr).toMatch(/downloading data\/train-00000-of-00001\.parquet \(8\.7 KiB\)/);
    expect(`${r.stdout}${r.stderr}`).not.toContain(TOKEN);
  });

  it('refuses what it cannot fetch with one line and the exit code', async () => {
    const gated = await inProcess(['datasets', 'fetch', 'org/gated-dataset'], { HF_HUB_CACHE: freshCache() });
    expect(gated.code).toBe(2);
    expect(gated.err.split('\n').filter((l) => l.startsWith('canary-audit:'))).toHaveLength(1);
    expect(gated.err).toMatch(/HTTP 401.*set HF_TOKEN/);
    const wrong = await inProcess(['datasets', 'fetch', 'org/gated-dataset'], {
      HF_HUB_CACHE: freshCache(),
      HF_TOKEN: 'hf_wrongButSecret',
    });
    expect([
      wrong.code,
      /HTTP 403.*accept the dataset's terms/.test(wrong.err),
      wrong.err.includes('hf_wrongButSecret'),
    ]).toEqual([2, true, false]);
    const rev = await inProcess(['datasets', 'fetch', 'PolyAI/banking77', '--revision', 'v9'], {
      HF_HUB_CACHE: freshCache(),
    });
    expect([rev.code, errorLine(rev.err)]).toEqual([
      2,
      `canary-audit: dataset "PolyAI/banking77" has no revision "v9" on ${hub.url} (HTTP 404); name a branch, tag or commit sha it has (${hub.url}/datasets/PolyAI/banking77/tree/main lists them), or none for main`,
    ]);
    const split = await inProcess(['datasets', 'fetch', 'PolyAI/banking77', '--split', 'validation'], {
      HF_HUB_CACHE: freshCache(),
    });
    expect([split.code, errorLine(split.err)]).toEqual([
      2,
      'canary-audit: dataset PolyAI/banking77@main has no split "validation": the card\'s config "default" declares no such split; its splits: train, test; name its files in source.files.validation',
    ]);
    const config = await inProcess(['datasets', 'fetch', 'PolyAI/banking77', '--config', 'xx'], {
      HF_HUB_CACHE: freshCache(),
    });
    expect([config.code, errorLine(config.err)]).toEqual([
      2,
      'canary-audit: dataset PolyAI/banking77@main has no config "xx"; its configs: default',
    ]);
    const dead = await deadHubUrl();
    const down = await inProcess(['datasets', 'fetch', 'PolyAI/banking77'], {
      HF_HUB_CACHE: freshCache(),
      HF_ENDPOINT: dead,
    });
    expect(down.code).toBe(1);
    expect(down.err).toMatch(
      /canary-audit: cannot reach .* for dataset "PolyAI\/banking77" at revision "main": ECONNREFUSED; .* fetch it where the Hub is reachable: canary-audit datasets fetch PolyAI\/banking77\n$/,
    );
    const local = await inProcess(['datasets', 'fetch', './data/rows.jsonl']);
    expect([local.code, local.err]).toEqual([
      2,
      'canary-audit: "./data/rows.jsonl" is not a Hub dataset id (org/name); a local file or folder needs no fetch: name it in the task\'s source.path\n',
    ]);
    const other = await inProcess(['datasets', 'list', 'x']);
    expect(other.err).toBe(
      'canary-audit: datasets has no action "list"; its one action is fetch (download datasets into the local Hugging Face cache); usage: canary-audit datasets fetch GRID|REPO; see `canary-audit help datasets`\n',
    );
  });

  it("GRID: fetches every Hub dataset the grid's tasks read, with the splits each task reads", async () => {
    const grid = join(root, 'two-tasks.yaml');
    writeFileSync(
      grid,
      `axes:
  visibility: [redacted]
  dose: [1]
  task: [banking77, {name: banking77, system: null, label: b77-short}, tat-qa, {name: synthetic-email}]
training: {batch_size: 4, updates: 10, lr: 0.001}
`,
    );
    const cache = freshCache();
    const r = await inProcess(['datasets', 'fetch', grid, '--json'], { HF_HUB_CACHE: cache });
    expect(r.code, r.err).toBe(0);
    const out = JSON.parse(r.out) as { repo: string; splits: Record<string, unknown[]> }[];
    // banking77 twice (same source, same splits) is fetched once.
    expect(out.map((d) => [d.repo, Object.keys(d.splits).sort()])).toEqual([
      ['PolyAI/banking77', ['test', 'train']],
      ['next-tat/TAT-QA', ['dev', 'train']],
    ]);
    const flag = await inProcess(['datasets', 'fetch', grid, '--split', 'train'], { HF_HUB_CACHE: cache });
    expect(flag.code).toBe(2);
    expect(errorLine(flag.err)).toMatch(/apply to a single REPO; .*two-tasks.yaml is a grid/);
  });
});

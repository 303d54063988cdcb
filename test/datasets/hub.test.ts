import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatasetError, fetchDataset, loadTaskData, pinDataset, type LoadOptions } from '../../src/datasets/index.js';
import type { DatasetSourceSpec } from '../../src/contracts/index.js';
import { BANKING77_LABELS, FIXTURES_DIR } from '../fixtures/datasets/build.js';
import {
  BANKING77_SHA,
  fixtureDatasets,
  GATED_DATASET_SHA,
  startDatasetHub,
  TATQA_SHA,
} from '../hub/dataset-fixture.js';
import type { FakeHub } from '../hub/fake-hub.js';
import { CLEAN_HUB_ENV, deadHubUrl, TOKEN, withEnv } from '../hub/hub-fixture.js';

/** Hub datasets through the fake Hub, into a fresh Hugging Face cache per test. */
let hub: FakeHub;
let dead = '';
const root = mkdtempSync(join(tmpdir(), 'canary-hub-ds-'));
let restore: () => void = () => undefined;
beforeAll(async () => {
  hub = await startDatasetHub();
  dead = await deadHubUrl();
  restore = withEnv(CLEAN_HUB_ENV);
});
afterAll(async () => {
  restore();
  await hub.stop();
  rmSync(root, { recursive: true, force: true });
});

let n = 0;
const freshCache = (): string => join(root, `cache-${++n}`);
const options = (cacheDir: string, more: Partial<LoadOptions> = {}): LoadOptions => ({
  gridDir: root,
  hubUrl: hub.url,
  cacheDir,
  accessToken: null,
  offline: false,
  ...more,
});
const BANKING = { repo: 'PolyAI/banking77' };
const fixture = (path: string): Buffer => readFileSync(join(FIXTURES_DIR, 'banking77-mini', path));
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function failure(source: DatasetSourceSpec, splits: string[], opts: LoadOptions): Promise<DatasetError> {
  const error = await loadTaskData(source, splits, opts).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(DatasetError);
  return error as DatasetError;
}

describe('Hub datasets: fetch into the Hugging Face cache and load', () => {
  it('loads PolyAI/banking77 pinned to its commit, fetching the card and only the split asked for', async () => {
    const cache = freshCache();
    const start = hub.requests.length;
    const data = await loadTaskData(BANKING, ['train'], options(cache));
    expect(data.splits.train).toHaveLength(480);
    expect(data.splits.train?.every((r) => typeof r.text === 'string' && Number.isInteger(r.label))).toBe(true);
    expect(data.features.label?.names).toEqual([...BANKING77_LABELS]);
    const train = fixture('data/train-00000-of-00001.parquet');
    expect(data.provenance).toEqual({
      source: 'hub',
      repo: 'PolyAI/banking77',
      revision: 'main',
      sha: BANKING77_SHA,
      config: null,
      files: [
        { split: 'train', path: 'data/train-00000-of-00001.parquet', sha256: sha256(train), bytes: train.length },
      ],
    });
    // The calls @huggingface/hub makes for a dataset repository, and nothing for the test split.
    const urls = hub.requests
      .slice(start)
      .filter((r) => r.server === 'hub')
      .map((r) => r.url.split('?')[0]);
    expect([...new Set(urls)]).toEqual([
      '/api/datasets/PolyAI/banking77/revision/main',
      `/api/datasets/PolyAI/banking77/tree/${BANKING77_SHA}`,
      `/datasets/PolyAI/banking77/resolve/${BANKING77_SHA}/README.md`,
      `/datasets/PolyAI/banking77/resolve/${BANKING77_SHA}/data/train-00000-of-00001.parquet`,
    ]);
    // The standard layout: datasets--org--name, blobs by etag, relative links, the ref.
    const repo = join(cache, 'datasets--PolyAI--banking77');
    expect(readFileSync(join(repo, 'refs', 'main'), 'utf8')).toBe(BANKING77_SHA);
    const snapshot = join(repo, 'snapshots', BANKING77_SHA);
    expect(readdirSync(snapshot).sort()).toEqual(['README.md', 'data']);
    expect(readdirSync(join(snapshot, 'data'))).toEqual(['train-00000-of-00001.parquet']);
    expect(readlinkSync(join(snapshot, 'data', 'train-00000-of-00001.parquet'))).toBe(
      `../../../blobs/${sha256(train)}`,
    );
  });

  it('a second load downloads nothing; another split downloads only its file', async () => {
    const cache = freshCache();
    await loadTaskData(BANKING, ['train'], options(cache));
    const before = hub.downloads().length;
    const again = await loadTaskData(BANKING, ['train'], options(cache));
    expect(again.splits.train).toHaveLength(480);
    expect(hub.downloads().length).toBe(before);
    const both = await loadTaskData(BANKING, ['train', 'test'], options(cache));
    expect(both.splits.test).toHaveLength(96);
    expect(
      hub
        .downloads()
        .slice(before)
        .map((r) => r.url),
    ).toEqual([`/cdn/datasets/PolyAI/banking77/${BANKING77_SHA}/data/test-00000-of-00001.parquet`]);
  });

  it('offline (HF_HUB_OFFLINE) loads from the cache without a request; a split not cached names the fetch command', async () => {
    const cache = freshCache();
    const online = await loadTaskData(BANKING, ['train'], options(cache));
    const undo = withEnv({ HF_HUB_OFFLINE: '1' });
    try {
      const start = hub.requests.length;
      const offline = await loadTaskData(BANKING, ['train'], {
        gridDir: root,
        hubUrl: hub.url,
        cacheDir: cache,
        accessToken: null,
      });
      expect(hub.requests.length).toBe(start);
      expect(offline).toEqual(online);
      const missing = await failure(BANKING, ['test'], {
        gridDir: root,
        hubUrl: hub.url,
        cacheDir: cache,
        accessToken: null,
      });
      expect([missing.code, missing.exitCode, missing.split]).toEqual(['E_DATASET_NOT_CACHED', 1, 'test']);
      expect(missing.message).toMatch(
        /^HF_HUB_OFFLINE is set; split "test" of dataset PolyAI\/banking77@main is not in the local cache .*; fetch it where the Hub is reachable: canary-audit datasets fetch PolyAI\/banking77 --split test$/,
      );
    } finally {
      undo();
    }
  });

  it('an unreachable Hub: the cache answers when it has the data; else an error with the fetch command', async () => {
    const cache = freshCache();
    const online = await loadTaskData(BANKING, ['train'], options(cache));
    const fromCache = await loadTaskData(BANKING, ['train'], options(cache, { hubUrl: dead }));
    expect(fromCache).toEqual(online);
    const error = await failure({ ...BANKING, revision: 'v2' }, ['train'], options(freshCache(), { hubUrl: dead }));
    expect([error.code, error.exitCode, error.field]).toEqual(['E_DATASET_NOT_CACHED', 1, 'source.repo']);
    expect(error.message).toMatch(
      new RegExp(
        `^cannot reach ${dead} for dataset "PolyAI/banking77" at revision "v2": ECONNREFUSED; PolyAI/banking77@v2 is not in the local cache .* either; fetch it where the Hub is reachable: canary-audit datasets fetch PolyAI/banking77 --revision v2$`,
      ),
    );
  });

  it('pins a revision to its commit sha: the Hub, a sha as given, a cached ref when offline', async () => {
    const cache = freshCache();
    expect(
      await pinDataset('PolyAI/banking77', null, {
        hubUrl: hub.url,
        cacheDir: cache,
        accessToken: null,
        offline: false,
      }),
    ).toMatchObject({ sha: BANKING77_SHA, source: 'hub', cached: false });
    const bySha = await loadTaskData({ ...BANKING, revision: BANKING77_SHA }, ['test'], options(cache));
    expect(bySha.provenance).toMatchObject({ revision: BANKING77_SHA, sha: BANKING77_SHA });
    // A sha needs no ref; loading by branch writes one.
    expect(existsSync(join(cache, 'datasets--PolyAI--banking77', 'refs', 'main'))).toBe(false);
    await loadTaskData(BANKING, ['test'], options(cache));
    expect(
      await pinDataset('PolyAI/banking77', 'main', { hubUrl: hub.url, cacheDir: cache, offline: true }),
    ).toMatchObject({ sha: BANKING77_SHA, source: 'cache', cached: true, reason: 'HF_HUB_OFFLINE is set' });
    expect(await pinDataset('PolyAI/banking77', 'f'.repeat(40), { cacheDir: cache })).toMatchObject({
      sha: 'f'.repeat(40),
      source: 'given',
      cached: false,
    });
  });

  it('next-tat/TAT-QA: splits by file name (dev asked as dev or validation), JSON documents', async () => {
    const cache = freshCache();
    const data = await loadTaskData({ repo: 'next-tat/TAT-QA' }, ['train', 'dev'], options(cache));
    expect([data.splits.train?.length, data.splits.dev?.length]).toEqual([12, 4]);
    expect(data.provenance).toMatchObject({
      repo: 'next-tat/TAT-QA',
      sha: TATQA_SHA,
      files: [
        { split: 'train', path: 'tatqa_dataset_train.json' },
        { split: 'dev', path: 'tatqa_dataset_dev.json' },
      ],
    });
    // biome-ignore lint/correctness/noUnsafeOptionalChaining: a missing split fails the test here, as it should
    const q = (data.splits.train?.[0] as { questions: { answer_type: string }[] }).questions[0];
    expect(['span', 'multi-span', 'arithmetic', 'count']).toContain(q?.answer_type);
    const missing = await failure({ repo: 'next-tat/TAT-QA' }, ['test'], options(cache));
    expect(missing.message).toBe(
      'dataset next-tat/TAT-QA@main has no split "test" (no file or folder is named for it); its splits: train, validation; name its files in source.files.test',
    );
  });

  it('fetchDataset without splits fetches every split of the config, and reports sizes', async () => {
    const cache = freshCache();
    const got = await fetchDataset(
      'PolyAI/banking77',
      { splits: null },
      { hubUrl: hub.url, cacheDir: cache, accessToken: null, offline: false },
    );
    expect(Object.keys(got.splits)).toEqual(['train', 'test']);
    expect(got.splits.test?.[0]).toMatchObject({
      path: 'data/test-00000-of-00001.parquet',
      bytes: fixture('data/test-00000-of-00001.parquet').length,
    });
    expect([got.files, got.downloadedFiles, got.config, got.pinned]).toEqual([3, 3, 'default', 'hub']);
  });
});

describe('Hub dataset errors', () => {
  it('a revision the dataset does not have: a branch or a sha, at source.revision', async () => {
    const error = await failure({ ...BANKING, revision: 'nope' }, ['train'], options(freshCache()));
    expect([error.code, error.exitCode, error.field]).toEqual(['E_DATASET_REVISION', 2, 'source.revision']);
    expect(error.message).toBe(
      `dataset "PolyAI/banking77" has no revision "nope" on ${hub.url} (HTTP 404); name a branch, tag or commit sha it has (${hub.url}/datasets/PolyAI/banking77/tree/main lists them), or none for main`,
    );
    const sha = await failure({ ...BANKING, revision: 'e'.repeat(40) }, ['train'], options(freshCache()));
    expect([sha.code, sha.field]).toEqual(['E_DATASET_REVISION', 'source.revision']);
  });

  it('an unknown dataset, at source.repo', async () => {
    const error = await failure({ repo: 'org/no-such-dataset' }, ['train'], options(freshCache()));
    expect([error.code, error.field]).toEqual(['E_DATASET_REPO', 'source.repo']);
    expect(error.message).toBe(
      `dataset "org/no-such-dataset" is not on ${hub.url} (HTTP 404); check the name (org/name, as in ${hub.url}/datasets/org/name)`,
    );
  });

  it('a gated dataset: 401 without a token (set HF_TOKEN), 403 with a wrong one (accept the terms), loads with the token', async () => {
    const none = await failure({ repo: 'org/gated-dataset' }, ['train'], options(freshCache()));
    expect([none.code, none.field]).toEqual(['E_DATASET_ACCESS', 'source.repo']);
    expect(none.message).toBe(
      `dataset "org/gated-dataset" at revision "main" is not available from ${hub.url} (HTTP 401); it may be gated or private: set HF_TOKEN (or run \`hf auth login\`) with a token that has access (the Hub also answers 401 for a dataset that does not exist: check the name)`,
    );
    const wrong = await failure(
      { repo: 'org/gated-dataset' },
      ['train'],
      options(freshCache(), { accessToken: 'hf_wrong' }),
    );
    expect(wrong.message).toBe(
      `dataset "org/gated-dataset" at revision "main" is not available from ${hub.url} (HTTP 403); the token sent has no access: accept the dataset's terms on its Hub page or use a token with read access`,
    );
    const start = hub.requests.length;
    const data = await loadTaskData(
      { repo: 'org/gated-dataset' },
      ['train'],
      options(freshCache(), { accessToken: TOKEN }),
    );
    expect(data.provenance.sha).toBe(GATED_DATASET_SHA);
    const sent = hub.requests.slice(start);
    expect(sent.filter((r) => r.server === 'hub').every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(sent.filter((r) => r.server === 'cdn').every((r) => r.authorization === undefined)).toBe(true);
  });

  it('a damaged cached file is named, with how to fetch it again', async () => {
    const cache = freshCache();
    await loadTaskData(BANKING, ['test'], options(cache));
    const blob = resolve(
      dirname(join(cache, 'datasets--PolyAI--banking77', 'snapshots', BANKING77_SHA, 'data', 'x')),
      readlinkSync(
        join(cache, 'datasets--PolyAI--banking77', 'snapshots', BANKING77_SHA, 'data', 'test-00000-of-00001.parquet'),
      ),
    );
    chmodSync(blob, 0o644);
    writeFileSync(blob, 'garbage');
    const error = await failure(BANKING, ['test'], options(cache));
    expect(error.code).toBe('E_DATASET_FILE');
    expect(error.message).toMatch(
      /^data\/test-00000-of-00001\.parquet of PolyAI\/banking77@7{8}b{32} \(.*\): .*; it is not a readable Parquet file/,
    );
    // A readable Parquet file, but not the one listed: the blob's name (its sha256) gives it away.
    writeFileSync(blob, fixture('data/train-00000-of-00001.parquet'));
    const swapped = await failure(BANKING, ['test'], options(cache));
    expect([swapped.code, swapped.split]).toEqual(['E_DATASET_FILE', 'test']);
    expect(swapped.message).toMatch(
      /^data\/test-00000-of-00001\.parquet of PolyAI\/banking77@7{8}b{32} \(.*\): the cached copy's sha256 [0-9a-f]{64} is not the [0-9a-f]{64} the Hub listed: the cache is damaged; delete that file and its blob, then fetch again: canary-audit datasets fetch PolyAI\/banking77 --split test$/,
    );
  });

  it('the fixtures stand in for the real repositories under their names', () => {
    expect(Object.keys(fixtureDatasets())).toEqual([
      'PolyAI/banking77',
      'next-tat/TAT-QA',
      'likaixin/ScreenSpot-Pro',
      'MMInstruction/OSWorld-G',
      'org/gated-dataset',
    ]);
  });
});

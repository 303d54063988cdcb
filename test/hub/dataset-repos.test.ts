import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { datasetInfo, downloadFile, listFiles } from '@huggingface/hub';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchSnapshot, HubCache, type HubError, hubClient, remoteCommit } from '../../src/hub/index.js';
import { BANKING77_SHA, startDatasetHub } from './dataset-fixture.js';
import { FakeHub } from './fake-hub.js';
import { fakeRepos, SHA_MAIN, TOKEN } from './hub-fixture.js';

/**
 * Dataset repositories on the fake Hub, through @huggingface/hub itself (the requests it makes for
 * `repo: {type: 'dataset'}`), and through src/hub's fetch with repoType dataset.
 */
let hub: FakeHub;
const root = mkdtempSync(join(tmpdir(), 'canary-hub-datasets-'));
beforeAll(async () => {
  hub = await startDatasetHub();
});
afterAll(async () => {
  await hub.stop();
  rmSync(root, { recursive: true, force: true });
});

const repo = { type: 'dataset' as const, name: 'PolyAI/banking77' };

describe('the fake Hub`s dataset routes, as @huggingface/hub calls them', () => {
  it('datasetInfo: /api/datasets/<repo>/revision/<rev>, HEAD for the default branch', async () => {
    const start = hub.requests.length;
    const info = await datasetInfo({
      name: 'PolyAI/banking77',
      revision: 'main',
      additionalFields: ['sha'],
      hubUrl: hub.url,
    });
    expect(info.sha).toBe(BANKING77_SHA);
    expect((await datasetInfo({ name: 'PolyAI/banking77', additionalFields: ['sha'], hubUrl: hub.url })).sha).toBe(
      BANKING77_SHA,
    );
    expect(hub.requests.slice(start).map((r) => r.url.split('?')[0])).toEqual([
      '/api/datasets/PolyAI/banking77/revision/main',
      '/api/datasets/PolyAI/banking77/revision/HEAD',
    ]);
  });

  it('listFiles: the whole tree, or one folder`s children (directories included) without recursive', async () => {
    const all: string[] = [];
    for await (const e of listFiles({ repo, revision: 'main', recursive: true, hubUrl: hub.url }))
      all.push(`${e.type}:${e.path}`);
    expect(all.sort()).toEqual([
      'directory:data',
      'file:.gitattributes',
      'file:README.md',
      'file:data/test-00000-of-00001.parquet',
      'file:data/train-00000-of-00001.parquet',
    ]);
    const top: string[] = [];
    for await (const e of listFiles({ repo, revision: 'main', hubUrl: hub.url })) top.push(`${e.type}:${e.path}`);
    expect(top.sort()).toEqual(['directory:data', 'file:.gitattributes', 'file:README.md']);
    const data: { path: string; lfs?: { oid: string } }[] = [];
    for await (const e of listFiles({ repo, revision: BANKING77_SHA, path: 'data', hubUrl: hub.url })) data.push(e);
    expect(data.map((e) => e.path).sort()).toEqual([
      'data/test-00000-of-00001.parquet',
      'data/train-00000-of-00001.parquet',
    ]);
    expect(data.every((e) => /^[0-9a-f]{64}$/.test(e.lfs?.oid ?? ''))).toBe(true);
    expect(hub.requests.at(-1)?.url).toBe(
      `/api/datasets/PolyAI/banking77/tree/${BANKING77_SHA}/data?recursive=false&expand=false`,
    );
  });

  it('downloadFile: /datasets/<repo>/resolve/<rev>/<path>, LFS files by way of the CDN', async () => {
    const start = hub.requests.length;
    const blob = await downloadFile({
      repo,
      path: 'data/test-00000-of-00001.parquet',
      revision: 'main',
      hubUrl: hub.url,
    });
    const bytes = Buffer.from(await (blob as Blob).arrayBuffer());
    expect(bytes.subarray(0, 4).toString()).toBe('PAR1');
    const seen = hub.requests.slice(start).map((r) => `${r.server} ${r.url}`);
    expect(seen[0]).toBe('hub /datasets/PolyAI/banking77/resolve/main/data/test-00000-of-00001.parquet');
    expect(seen.some((s) => s.startsWith(`cdn /cdn/datasets/PolyAI/banking77/${BANKING77_SHA}/`))).toBe(true);
    expect(await downloadFile({ repo, path: 'nope.txt', revision: 'main', hubUrl: hub.url })).toBeNull();
  });

  it('models and datasets are separate namespaces: a model name is not a dataset, nor the other way', async () => {
    const both = await new FakeHub(fakeRepos(), TOKEN, {
      'org/tiny-model': { branches: { main: BANKING77_SHA }, commits: { [BANKING77_SHA]: {} } },
    }).start();
    try {
      const client = hubClient({ hubUrl: both.url, accessToken: null });
      expect(await remoteCommit('org/tiny-model', 'main', client)).toBe(SHA_MAIN);
      expect(await remoteCommit('org/tiny-model', 'main', client, 'dataset')).toBe(BANKING77_SHA);
      const missing = await remoteCommit('org/gated-model', 'main', client, 'dataset').catch((e: unknown) => e);
      expect((missing as HubError).failure).toBe('not-found');
      expect((missing as HubError).code).toBe('E_HUB_DATASET');
      expect((missing as Error).message).toBe(
        `dataset "org/gated-model" at revision "main" is not on ${both.url} (HTTP 404); check the name and revision`,
      );
    } finally {
      await both.stop();
    }
  });
});

describe('fetchSnapshot of a dataset repository', () => {
  it('writes datasets--org--name in the cache, and fetches only the files asked for', async () => {
    const cache = join(root, 'cache');
    const got = await fetchSnapshot('PolyAI/banking77', null, {
      hubUrl: hub.url,
      cacheDir: cache,
      accessToken: null,
      repoType: 'dataset',
      include: (p) => p === 'README.md' || p.startsWith('data/test-'),
    });
    expect(got).toMatchObject({ sha: BANKING77_SHA, files: 2, downloadedFiles: 2 });
    expect(got.snapshotDir).toBe(join(cache, 'datasets--PolyAI--banking77', 'snapshots', BANKING77_SHA));
    expect(readdirSync(cache)).toEqual(['datasets--PolyAI--banking77']);
    expect(readFileSync(join(cache, 'datasets--PolyAI--banking77', 'refs', 'main'), 'utf8')).toBe(BANKING77_SHA);
    expect(existsSync(join(got.snapshotDir, 'data', 'train-00000-of-00001.parquet'))).toBe(false);
    expect(new HubCache(cache, 'dataset').snapshotFiles('PolyAI/banking77', BANKING77_SHA)).toEqual([
      'README.md',
      'data/test-00000-of-00001.parquet',
    ]);
    expect(new HubCache(cache, 'dataset').cachedSha('PolyAI/banking77', 'main')).toBe(BANKING77_SHA);
    expect(new HubCache(cache).cachedSha('PolyAI/banking77', 'main')).toBeNull();
  });
});

import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchSnapshot, HubError } from '../../src/hub/index.js';
import { etagOf, sha256, type FakeHub } from './fake-hub.js';
import { CLEAN_HUB_ENV, deadHubUrl, SHA_MAIN, SHA_V1, TOKEN, fakeRepos, startFakeHub, withEnv } from './hub-fixture.js';

let hub: FakeHub;
const root = mkdtempSync(join(tmpdir(), 'canary-hub-fetch-'));
let restore: () => void = () => undefined;
beforeAll(async () => {
  hub = await startFakeHub();
  restore = withEnv(CLEAN_HUB_ENV);
});
afterAll(async () => {
  restore();
  await hub.stop();
  rmSync(root, { recursive: true, force: true });
});

let n = 0;
const freshCache = (): string => join(root, `cache-${++n}`);
const options = (cacheDir: string, accessToken: string | null = null) => ({ hubUrl: hub.url, cacheDir, accessToken });
const repoDir = (cacheDir: string, name = 'org/tiny-model'): string =>
  join(cacheDir, `models--${name.replace('/', '--')}`);

describe('models fetch: the Hugging Face cache layout', () => {
  it('writes blobs named by etag, relative snapshot links and the ref, with the files intact', async () => {
    const cache = freshCache();
    const got = await fetchSnapshot('org/tiny-model', null, options(cache));
    const repo = repoDir(cache);
    expect(got).toMatchObject({
      sha: SHA_MAIN,
      revision: 'main',
      files: 4,
      downloadedFiles: 4,
      snapshotDir: join(repo, 'snapshots', SHA_MAIN),
    });
    expect(readFileSync(join(repo, 'refs', 'main'), 'utf8')).toBe(SHA_MAIN);
    const files = fakeRepos()['org/tiny-model']!.commits[SHA_MAIN]!;
    expect(readdirSync(join(repo, 'blobs')).sort()).toEqual(Object.values(files).map(etagOf).sort());
    for (const [path, file] of Object.entries(files)) {
      const depth = path.split('/').length;
      expect(readlinkSync(join(got.snapshotDir, path))).toBe(`${'../'.repeat(depth + 1)}blobs/${etagOf(file)}`);
      expect(readFileSync(join(got.snapshotDir, path)).equals(file.content)).toBe(true);
    }
    // The weights are an LFS file: their blob is named by the content's sha256.
    expect(existsSync(join(repo, 'blobs', sha256(files['model.safetensors']!.content)))).toBe(true);
    expect(readdirSync(join(repo, 'blobs')).filter((f) => f.includes('incomplete') || f.endsWith('.tmp'))).toEqual([]);
  });

  it('downloads nothing the second time, and only the changed file for another commit', async () => {
    const cache = freshCache();
    await fetchSnapshot('org/tiny-model', 'main', options(cache));
    const before = hub.downloads().length;
    const again = await fetchSnapshot('org/tiny-model', 'main', options(cache));
    expect(again).toMatchObject({ downloadedFiles: 0, downloadedBytes: 0 });
    expect(hub.downloads().length).toBe(before);
    const v1 = await fetchSnapshot('org/tiny-model', 'v1', options(cache));
    expect(v1).toMatchObject({ sha: SHA_V1, downloadedFiles: 1 });
    expect(
      hub
        .downloads()
        .slice(before)
        .map((r) => r.url),
    ).toEqual([`/org/tiny-model/resolve/${SHA_V1}/tokenizer.json`]);
    expect(readFileSync(join(repoDir(cache), 'refs', 'v1'), 'utf8')).toBe(SHA_V1);
  });

  it('reports download progress per chunk up to the file size', async () => {
    const seen: [string, number, number][] = [];
    const states: string[] = [];
    await fetchSnapshot('org/tiny-model', null, {
      ...options(freshCache()),
      progress: { bytes: (p, d, t) => seen.push([p, d, t]), file: (p, _s, st) => states.push(`${p}:${st}`) },
    });
    const weights = seen.filter(([p]) => p === 'model.safetensors');
    expect(weights.at(-1)).toEqual(['model.safetensors', 300_000, 300_000]);
    expect(states).toContain('model.safetensors:download');
  });

  it('a gated model needs the token: 401 without, the files with it, sent only as a header', async () => {
    const cache = freshCache();
    const error = await fetchSnapshot('org/gated-model', null, options(cache)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HubError);
    expect((error as HubError).failure).toBe('unauthorized');
    expect((error as Error).message).toMatch(/HTTP 401.*set HF_TOKEN/);
    const start = hub.requests.length;
    const got = await fetchSnapshot('org/gated-model', null, options(cache, TOKEN));
    expect(got.downloadedFiles).toBe(4);
    const sent = hub.requests.slice(start).filter((r) => r.server === 'hub');
    expect(sent.every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(sent.some((r) => r.url.includes(TOKEN))).toBe(false);
    // The weights come from the CDN the Hub redirects to: no token goes there.
    const cdn = hub.requests.slice(start).filter((r) => r.server === 'cdn');
    expect(cdn.length).toBeGreaterThan(0);
    expect(cdn.every((r) => r.authorization === undefined)).toBe(true);
    const wrong = await fetchSnapshot('org/gated-model', null, options(freshCache(), 'hf_wrong')).catch(
      (e: unknown) => e,
    );
    expect((wrong as Error).message).toMatch(/HTTP 403.*no access/);
  });

  it('keeps nothing of a download whose bytes differ from what the Hub lists', async () => {
    const cache = freshCache();
    const file = hub.repos['org/tiny-model']!.commits[SHA_MAIN]!['tokenizer.json']!;
    file.served = Buffer.from(file.content.toString().replace('main', 'mainX').slice(0, file.content.length));
    try {
      const error = await fetchSnapshot('org/tiny-model', null, options(cache)).catch((e: unknown) => e);
      expect((error as Error).message).toMatch(
        /^tokenizer\.json of org\/tiny-model@1{8}a{32}: content hash [0-9a-f]{40} differs from the Hub's [0-9a-f]{40}; fetch again$/,
      );
    } finally {
      delete file.served;
    }
    const repo = repoDir(cache);
    expect(readdirSync(join(repo, 'blobs')).filter((f) => !f.match(/^[0-9a-f]+$/))).toEqual([]);
    expect(existsSync(join(repo, 'snapshots', SHA_MAIN, 'tokenizer.json'))).toBe(false);
    expect(existsSync(join(repo, 'refs', 'main'))).toBe(false);
    // Fetched again, it completes with the right bytes.
    expect((await fetchSnapshot('org/tiny-model', null, options(cache))).files).toBe(4);
  });

  it('names an unknown model or revision (404) and a Hub that cannot be reached', async () => {
    const missing = await fetchSnapshot('org/nope', null, options(freshCache())).catch((e: unknown) => e);
    expect((missing as HubError).failure).toBe('not-found');
    expect((missing as Error).message).toBe(
      `model "org/nope" at revision "main" is not on ${hub.url} (HTTP 404); check the name and revision`,
    );
    const badRev = await fetchSnapshot('org/tiny-model', 'nope', options(freshCache())).catch((e: unknown) => e);
    expect((badRev as HubError).failure).toBe('not-found');
    const dead = await deadHubUrl();
    const down = await fetchSnapshot('org/tiny-model', null, { ...options(freshCache()), hubUrl: dead }).catch(
      (e: unknown) => e,
    );
    expect((down as HubError).failure).toBe('unreachable');
    expect((down as Error).message).toBe(
      `cannot reach ${dead} for model "org/tiny-model" at revision "main": ECONNREFUSED`,
    );
  });
});

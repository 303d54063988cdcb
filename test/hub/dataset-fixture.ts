import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll } from 'vitest';
import { join } from 'node:path';
import { FIXTURES_DIR } from '../fixtures/datasets/build.js';
import { FakeHub, type FakeFile, type FakeRepo } from './fake-hub.js';
import { TOKEN } from './hub-fixture.js';

/**
 * Fixture folders served as dataset repositories of the fake Hub: branch main points at a fixed
 * commit; Parquet (and any file over 10 kB, as the Hub's default .gitattributes would put in LFS)
 * is stored as LFS; a .gitattributes like the Hub writes is added at the root.
 *
 *   const hub = await startDatasetHub({ 'PolyAI/banking77': datasetRepo('banking77-mini') });
 *   await loadTaskData({ repo: 'PolyAI/banking77' }, ['train'], { gridDir, hubUrl: hub.url, cacheDir, accessToken: null });
 */
export const BANKING77_SHA = '77'.repeat(4) + 'b'.repeat(32);
export const TATQA_SHA = '7a'.repeat(4) + 'c'.repeat(32);
export const GATED_DATASET_SHA = '99'.repeat(4) + 'd'.repeat(32);
export const SCREENSPOT_PRO_SHA = '55'.repeat(4) + 'e'.repeat(32);
export const OSWORLD_G_SHA = '56'.repeat(4) + 'f'.repeat(32);

const GITATTRIBUTES = `*.parquet filter=lfs diff=lfs merge=lfs -text
*.arrow filter=lfs diff=lfs merge=lfs -text
*.json.gz filter=lfs diff=lfs merge=lfs -text
`;

/** The files of a folder (relative to test/fixtures/datasets unless absolute) as one commit's files. */
export function folderFiles(dir: string): Record<string, FakeFile> {
  const root = dir.startsWith('/') ? dir : join(FIXTURES_DIR, dir);
  const files: Record<string, FakeFile> = { '.gitattributes': { content: Buffer.from(GITATTRIBUTES) } };
  const walk = (d: string, prefix: string): void => {
    for (const name of readdirSync(d).sort()) {
      const full = join(d, name);
      const path = prefix ? `${prefix}/${name}` : name;
      if (statSync(full).isDirectory()) walk(full, path);
      else {
        const content = readFileSync(full);
        files[path] = { content, lfs: name.endsWith('.parquet') || content.length > 10_000 };
      }
    }
  };
  walk(root, '');
  return files;
}

/** A fixture folder as a repository: main (and any extra branch) at `sha`. */
export function datasetRepo(
  dir: string,
  options: { sha?: string; branches?: Record<string, string>; gated?: boolean } = {},
): FakeRepo {
  const sha = options.sha ?? BANKING77_SHA;
  return { branches: { main: sha, ...options.branches }, commits: { [sha]: folderFiles(dir) }, gated: options.gated };
}

/** The fixtures under their Hub names, plus a gated copy of banking77. */
export function fixtureDatasets(): Record<string, FakeRepo> {
  return {
    'PolyAI/banking77': datasetRepo('banking77-mini', { sha: BANKING77_SHA }),
    'next-tat/TAT-QA': datasetRepo('tat-qa-mini', { sha: TATQA_SHA }),
    'likaixin/ScreenSpot-Pro': datasetRepo('screenspot-pro-mini', { sha: SCREENSPOT_PRO_SHA }),
    'MMInstruction/OSWorld-G': datasetRepo('osworld-g-mini', { sha: OSWORLD_G_SHA }),
    'org/gated-dataset': datasetRepo('banking77-mini', { sha: GATED_DATASET_SHA, gated: true }),
  };
}

/** A fake Hub serving these datasets (default: fixtureDatasets()) and no models; the gated one opens with TOKEN. */
export async function startDatasetHub(datasets: Record<string, FakeRepo> = fixtureDatasets()): Promise<FakeHub> {
  return new FakeHub({}, TOKEN, datasets).start();
}

/**
 * For a test file: the fixture Hub started before its tests and stopped after, with a scratch
 * folder removed after them too. `hub()` is the running server.
 */
export function datasetHubForTests(prefix: string): { hub: () => FakeHub; root: string } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  let server: FakeHub | undefined;
  beforeAll(async () => {
    server = await startDatasetHub();
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });
  return { hub: () => server as FakeHub, root };
}

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadAuditSource } from '../../src/app/index.js';
import { main } from '../../src/cli/main.js';
import { fetchSnapshot } from '../../src/hub/index.js';
import type { FakeHub } from '../hub/fake-hub.js';
import { CLEAN_HUB_ENV, SHA_MAIN, SHA_V1, deadHubUrl, startFakeHub, withEnv } from '../hub/hub-fixture.js';

/** plan, submit and run pin every Hub model to a commit sha by default (fake Hub, private cache). */
const root = mkdtempSync(join(tmpdir(), 'canary-pin-cli-'));
const grid = join(root, 'grid.yaml');
// A local model is said to be local (path:, relative to the grid) and holds a config.json.
mkdirSync(join(root, 'local-model'));
writeFileSync(join(root, 'local-model', 'config.json'), '{}');
writeFileSync(
  grid,
  `name: pins
axes:
  visibility: [redacted]
  dose: [1]
  model: [{backend: hf, name: org/tiny-model, label: main}, {backend: hf, name: org/tiny-model, revision: v1, label: v1}, {backend: hf, path: ./local-model, label: local}, tiny-small]
training: {batch_size: 4, updates: 10, lr: 0.001}
canaries: {focal: 1, held_out: 1}
`,
);

let hub: FakeHub;
let dead = '';
let restore: () => void = () => undefined;
let n = 0;
beforeAll(async () => {
  hub = await startFakeHub();
  dead = await deadHubUrl();
});
afterAll(async () => {
  await hub.stop();
  rmSync(root, { recursive: true, force: true });
});

let out = '';
let err = '';
/**
 * A fresh, empty cache and the fake Hub for each test; output captured. The trainer's Python is
 * named missing: the fake Hub's tokenizer.json is no tokenizer, so the plan-time row count would
 * start Python only to skip (test/e2e/hf-audit.test.ts runs that count on a real tokenizer).
 */
function setup(env: Record<string, string> = {}): string {
  const cache = join(root, `cache-${++n}`);
  restore = withEnv({
    ...CLEAN_HUB_ENV,
    HF_HOME: join(root, 'home'),
    HF_HUB_CACHE: cache,
    HF_ENDPOINT: hub.url,
    CANARY_AUDIT_PYTHON: join(root, 'no-python'),
    ...env,
  });
  out = '';
  err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c) => ((out += String(c)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((c) => ((err += String(c)), true));
  return cache;
}
afterEach(() => {
  vi.restoreAllMocks();
  restore();
});

const manifestRevisions = (auditDir: string): (string | null)[] => {
  const index = JSON.parse(readFileSync(join(auditDir, 'audit.json'), 'utf8')) as { runs: { dir: string }[] };
  return index.runs.map(
    (r) =>
      (
        JSON.parse(readFileSync(join(auditDir, r.dir, 'manifest.json'), 'utf8')) as {
          model: { revision: string | null };
        }
      ).model.revision,
  );
};

// The grid has one run per arm: plan's single-run warning is not what these tests are about.
const pinningLines = (text: string): string[] =>
  text.split('\n').filter((l) => l !== '' && !/rest on one run per arm/.test(l));

describe('revision pinning by default', () => {
  it('plan prints each Hub model with its sha, writes the sha into the manifests, and names the fetch for an uncached one', async () => {
    setup();
    expect(await main(['plan', grid, '--out', join(root, 'art')])).toBe(0);
    expect(out).toContain(
      `model org/tiny-model@main = ${SHA_MAIN} (from the Hub); not in the local cache, offline workers need: canary-audit models fetch org/tiny-model --revision ${SHA_MAIN}`,
    );
    expect(out).toContain(`model org/tiny-model@v1 = ${SHA_V1} (from the Hub)`);
    expect(pinningLines(err)).toEqual([]);
    const auditDir = /wrote (\S+)/.exec(out)?.[1] as string;
    expect(manifestRevisions(auditDir).sort()).toEqual([SHA_MAIN, SHA_V1, null, null].sort());
  });

  it('plan --json lists the pins; a cached snapshot needs no fetch', async () => {
    const cache = setup();
    await fetchSnapshot('org/tiny-model', 'main', { cacheDir: cache });
    expect(await main(['plan', grid, '--json'])).toBe(0);
    const plan = JSON.parse(out) as { models: Record<string, unknown>[] };
    expect(plan.models).toEqual([
      { name: 'org/tiny-model', revision: 'main', sha: SHA_MAIN, source: 'hub', cached: true },
      { name: 'org/tiny-model', revision: 'v1', sha: SHA_V1, source: 'hub', cached: false },
    ]);
  });

  it('--no-pin-revisions keeps the branches and warns once that they move', async () => {
    setup();
    const before = hub.requests.length;
    expect(await main(['plan', grid, '--no-pin-revisions', '--out', join(root, 'art-unpinned')])).toBe(0);
    expect(hub.requests.length).toBe(before);
    expect(pinningLines(err)).toEqual([
      'canary-audit: warning: revisions not pinned (--no-pin-revisions): the manifests name moving branches or tags (org/tiny-model@main, org/tiny-model@v1); the same audit may train other weights later',
    ]);
    const auditDir = /wrote (\S+)/.exec(out)?.[1] as string;
    expect(manifestRevisions(auditDir).sort()).toEqual(['v1', null, null, null].sort());
    expect(out).toContain('model org/tiny-model@main: not pinned');
  });

  it('plans offline from the refs of the local cache, and says so', async () => {
    const cache = setup();
    await fetchSnapshot('org/tiny-model', 'main', { cacheDir: cache, hubUrl: hub.url });
    await fetchSnapshot('org/tiny-model', 'v1', { cacheDir: cache, hubUrl: hub.url });
    restore();
    setup({ HF_HUB_CACHE: cache, HF_ENDPOINT: dead });
    expect(await main(['plan', grid])).toBe(0);
    expect(out).toContain(
      `model org/tiny-model@main = ${SHA_MAIN} (from the local cache: cannot reach ${dead} for model "org/tiny-model" at revision "main": ECONNREFUSED)`,
    );
    restore();
    setup({ HF_HUB_CACHE: cache, HF_HUB_OFFLINE: '1' });
    const before = hub.requests.length;
    expect(await main(['plan', grid])).toBe(0);
    expect(hub.requests.length).toBe(before);
    expect(out).toContain(`model org/tiny-model@v1 = ${SHA_V1} (from the local cache: HF_HUB_OFFLINE is set)`);
  });

  it('a model neither on a reachable Hub nor in the cache is one line naming the fetch command', async () => {
    const cache = setup({ HF_ENDPOINT: dead });
    expect(await main(['plan', grid])).toBe(1);
    expect(err).toBe(
      `canary-audit: cannot reach ${dead} for model "org/tiny-model" at revision "main": ECONNREFUSED; org/tiny-model@main is not in the local cache ${cache} either; fetch it where the Hub is reachable: canary-audit models fetch org/tiny-model\n`,
    );
  });

  it('a model the Hub does not know is reported at its grid entry', async () => {
    setup();
    const bad = join(root, 'bad.yaml');
    writeFileSync(
      bad,
      readFileSync(grid, 'utf8').replace('name: org/tiny-model, label: main', 'name: org/nope, label: main'),
    );
    expect(await main(['plan', bad])).toBe(2);
    expect(err).toMatch(
      /^canary-audit: .*bad\.yaml:5:\d+: axes\.model\[0\]: model "org\/nope" at revision "main" is not on .* \(HTTP 404\); check the name and revision\n$/,
    );
  });

  it('submit and run plan through the same pinning (on by default, off on request)', async () => {
    setup();
    const pinned = await loadAuditSource(grid, join(root, 'art-source'));
    expect(pinned.models?.pins.map((p) => p.sha)).toEqual([SHA_MAIN, SHA_V1]);
    expect(manifestRevisions(pinned.input.auditDir).sort()).toEqual([SHA_MAIN, SHA_V1, null, null].sort());
    const unpinned = await loadAuditSource(grid, join(root, 'art-source'), { pinRevisions: false });
    expect(unpinned.models?.unpinned).toEqual([
      { name: 'org/tiny-model', revision: null },
      { name: 'org/tiny-model', revision: 'v1' },
    ]);
    for (const name of ['run', 'submit']) {
      out = '';
      expect(await main([name, '--help'])).toBe(0);
      expect(out).toContain('--no-pin-revisions');
    }
  });
});

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { CLI } from '../helpers/cli-entry.js';
import type { FakeHub } from '../hub/fake-hub.js';
import { SHA_GATED, SHA_MAIN, TOKEN, startFakeHub } from '../hub/hub-fixture.js';

/** `canary-audit models fetch`, run as users run it (a child process), against the fake Hub. */
const root = mkdtempSync(join(tmpdir(), 'canary-models-cli-'));
let hub: FakeHub;
beforeAll(async () => {
  hub = await startFakeHub();
});
afterAll(async () => {
  await hub.stop();
  rmSync(root, { recursive: true, force: true });
});

/** Every Hub variable set here (none inherited), the most verbose logs, JSON log lines. */
function cli(args: string[], env: Record<string, string> = {}) {
  const home = join(root, 'hf-home');
  const base = {
    HF_HOME: home,
    HF_ENDPOINT: hub.url,
    HF_TOKEN: '',
    HUGGING_FACE_HUB_TOKEN: '',
    HF_HUB_CACHE: '',
    HF_HUB_OFFLINE: '',
    HF_TOKEN_PATH: '',
  };
  return execa(process.execPath, [...CLI, ...args], {
    cwd: PACKAGE_ROOT,
    env: { ...base, CANARY_AUDIT_LOG_LEVEL: 'trace', CANARY_AUDIT_LOG_FORMAT: 'json', ...env },
    reject: false,
  });
}

/** The CLI in this process, its output captured (for what needs no fresh environment). */
async function inProcess(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((c) => ((out += String(c)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((c) => ((err += String(c)), true));
  try {
    return { code: await main(args), out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

const GRID = `
axes:
  visibility: [redacted]
  dose: [1]
  model: [{backend: hf, name: org/tiny-model, label: open}, {backend: hf, name: org/gated-model, label: gated}, {backend: hf, path: ./local, label: local}, tiny]
training: {batch_size: 4, updates: 10, lr: 0.001}
canaries: {focal: 1, held_out: 1}
`;

const grid = join(root, 'grid.yaml');
writeFileSync(grid, GRID);
// The local model (path:, relative to the grid) must hold a config.json; fetch skips it.
mkdirSync(join(root, 'local'), { recursive: true });
writeFileSync(join(root, 'local', 'config.json'), '{}');

describe('canary-audit models fetch', () => {
  it('prints its help like the other commands', async () => {
    const help = await inProcess(['models', 'fetch', '--help']);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/^Usage: canary-audit models fetch GRID\|MODEL \[--revision R\] \[--json\]/);
    expect(help.out).toContain('--revision R');
    expect((await inProcess(['--help'])).out).toMatch(/\n {2}models +Download Hub models/);
  });

  it('fetches every Hub model of a grid with the token from the environment, and never shows the token', async () => {
    const cache = join(root, 'cache-grid');
    const first = await cli(['models', 'fetch', grid, '--json'], { HF_TOKEN: TOKEN, HF_HUB_CACHE: cache });
    expect(first.exitCode, first.stderr).toBe(0);
    const fetched = JSON.parse(first.stdout) as { name: string; sha: string; downloaded_files: number }[];
    expect(fetched.map((f) => [f.name, f.sha, f.downloaded_files])).toEqual([
      ['org/tiny-model', SHA_MAIN, 4],
      ['org/gated-model', SHA_GATED, 4],
    ]);
    const again = await cli(['models', 'fetch', grid], { HF_TOKEN: TOKEN, HF_HUB_CACHE: cache });
    expect(again.stdout).toContain(`org/gated-model@main = ${SHA_GATED}: 4 file(s), all in the cache already`);
    const denied = await cli(['models', 'fetch', 'org/gated-model'], {
      HUGGING_FACE_HUB_TOKEN: 'hf_wrongButSecretToo',
      HF_HUB_CACHE: join(root, 'cache-denied'),
    });
    expect(denied.exitCode).toBe(2);
    expect(denied.stderr).toMatch(/HTTP 403/);
    for (const r of [first, again, denied]) {
      expect(`${r.stdout}${r.stderr}`).not.toContain(TOKEN);
      expect(`${r.stdout}${r.stderr}`).not.toContain('hf_wrongButSecretToo');
    }
  });

  it('reads the token file the Hugging Face CLI writes, and shows progress on stderr', async () => {
    const home = join(root, 'home-with-token');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'token'), `${TOKEN}\n`);
    const r = await cli(['models', 'fetch', 'org/gated-model'], { HF_HOME: home });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(readFileSync(join(home, 'hub', 'models--org--gated-model', 'refs', 'main'), 'utf8')).toBe(SHA_GATED);
    expect(r.stderr).toContain(`fetching org/gated-model@main into ${join(home, 'hub')}`);
    expect(r.stderr).toMatch(/downloading model\.safetensors \(293\.0 KiB\)/);
    expect(`${r.stdout}${r.stderr}`).not.toContain(TOKEN);
  });

  it('refuses what it cannot fetch with one line', async () => {
    const tiny = await inProcess(['models', 'fetch', 'tiny']);
    expect([tiny.code, tiny.err]).toEqual([2, 'canary-audit: tiny is the built-in tiny model; it is not downloaded\n']);
    const gridRev = await inProcess(['models', 'fetch', grid, '--revision', 'v1']);
    expect(gridRev.code).toBe(2);
    expect(gridRev.err).toMatch(/^canary-audit: --revision: applies to a single MODEL; .* is a grid/);
    const other = await inProcess(['models', 'list', 'x']);
    expect(other.err).toMatch(
      /^canary-audit: models has no action "list"; its one action is fetch \(.*\); usage: canary-audit models fetch GRID\|MODEL; see `canary-audit help models`\n$/,
    );
    const gated = await cli(['models', 'fetch', 'org/gated-model'], { HF_HUB_CACHE: join(root, 'cache-none') });
    expect(gated.exitCode).toBe(2);
    const errors = gated.stderr.split('\n').filter((l) => l.startsWith('canary-audit:'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/HTTP 401.*set HF_TOKEN/);
  });
});

import { execFile, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { tiers } from './tiers.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('test tiers', () => {
  it('every test file is in exactly one tier, and this file is in the fast one', () => {
    const { fast, slow, full } = tiers(root);
    expect(fast.filter((f) => slow.includes(f) || full.includes(f))).toEqual([]);
    expect(slow.filter((f) => full.includes(f))).toEqual([]);
    expect(fast).toContain('test/tiers/tiers.test.ts');
    expect(fast.length + slow.length).toBeGreaterThan(60);
  });

  it('the tier mark is read before the first import only', () => {
    const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
    expect(text).toContain('// tier: slow');
    expect(tiers(root).slow).not.toContain('test/tiers/tiers.test.ts');
  });

  it('in the fast tier, starting redis-server, Python or Chromium throws, by path or by name', async () => {
    for (const program of [
      'redis-server',
      '/usr/bin/redis-server',
      'python3',
      '/x/.venv/bin/python',
      'python3.11',
      'chromium',
      '/opt/chrome-headless-shell',
    ]) {
      expect(() => spawn(program, ['--version']), program).toThrow(/the fast tier \(npm test\) may not start/);
      expect(() => spawnSync(program), program).toThrow(/may not start/);
      expect(() => execFile(program), program).toThrow(/may not start/);
    }
    await expect(async () => execa('python3', ['-c', 'pass'])).rejects.toThrow(/may not start python3/);
    // Other programs still start.
    expect(spawnSync(process.execPath, ['-e', 'process.exit(0)']).status).toBe(0);
  });

  it('a Node process a fast-tier test starts (the CLI, a worker) carries the guard', async () => {
    const child = await execa(
      process.execPath,
      ['-e', "require('node:child_process').spawnSync('redis-server', ['--version'])"],
      { reject: false },
    );
    expect(child.exitCode).not.toBe(0);
    expect(child.stderr).toMatch(/may not start redis-server/);
  });
});

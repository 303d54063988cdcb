import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * README.md is the product page: short, the commands exactly as package.json runs them, every CLI
 * command in its table, and no history (commit hashes, timings, test counts), which lives in
 * docs/benchmarks.md and CHANGELOG.md.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
  .scripts;

/** The command names the CLI dispatches (the keys of main.ts's COMMANDS table). */
function cliCommands(): string[] {
  const main = readFileSync(join(root, 'src', 'cli', 'main.ts'), 'utf8');
  const table = /const COMMANDS\b.*= \{\n([\s\S]*?)\n\};/.exec(main);
  if (!table?.[1]) throw new Error('src/cli/main.ts: no COMMANDS table found');
  return [...table[1].matchAll(/^ {2}(\w+): \{/gm)].map((m) => m[1] ?? '');
}

describe('README.md', () => {
  it('is at most 120 lines', () => {
    expect(readme.trimEnd().split('\n').length).toBeLessThanOrEqual(120);
  });

  it('shows the two commands and the fast tier exactly as package.json defines them', () => {
    for (const cmd of ['quickstart', 'test:all']) {
      expect(readme).toMatch(new RegExp(`^npm run ${cmd}\\s`, 'm'));
      expect(scripts[cmd]).toBeDefined();
    }
    expect(readme).toContain('`npm test`');
    expect(scripts.test).toContain('--project fast');
  });

  it('lists every CLI command in its table', () => {
    const commands = cliCommands();
    expect(commands.length).toBeGreaterThanOrEqual(11);
    const rows = readme.split('\n').filter((l) => l.startsWith('| `'));
    const listed = rows.map((r) => /^\| `(\w+)/.exec(r)?.[1]);
    expect(commands.filter((c) => !listed.includes(c))).toEqual([]);
  });

  it('carries no commit hash, timing or test count', () => {
    const hashes = readme.match(/`[0-9a-f]{7,40}`/g) ?? [];
    expect(hashes).toEqual([]);
    expect(
      readme.match(/\b\d+ min( \d+ s)?\b|\b\d+(\.\d+)? s (wall|user|system)\b|\b\d+ (tests|files) in\b/g) ?? [],
    ).toEqual([]);
  });
});

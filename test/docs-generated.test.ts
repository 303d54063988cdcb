import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { benchmarksPage, commandFiles, parseRecord, readRecords } from '../bench/records.js';
import { cliReference } from '../src/cli/reference.js';

/**
 * Pages generated from the code: they must equal what their generator prints now. `npm run
 * docs:update` (UPDATE_DOCS=1) rewrites them instead of comparing.
 */
const update = process.env.UPDATE_DOCS === '1';

async function check(relative: string, generate: () => Promise<string>): Promise<void> {
  const path = fileURLToPath(new URL(`../${relative}`, import.meta.url));
  const want = await generate();
  if (update) writeFileSync(path, want);
  expect(readFileSync(path, 'utf8'), `${relative} is stale: run \`npm run docs:update\``).toBe(want);
}

describe('generated docs', () => {
  it("docs/cli.md is every command's --help", async () => {
    await check('docs/cli.md', cliReference);
  });

  it('docs/benchmarks.md is the records of bench/results/', async () => {
    await check('docs/benchmarks.md', async () => benchmarksPage(readRecords()));
  });

  it('every record names a command whose files exist', () => {
    const root = fileURLToPath(new URL('..', import.meta.url));
    const missing = readRecords().flatMap((r) =>
      commandFiles(r.command)
        .filter((f) => !existsSync(`${root}/${f}`))
        .map((f) => `bench/results/${r.slug}.md: ${f}`),
    );
    expect(missing).toEqual([]);
  });

  it('refuses a record without a header, with an unknown key or a bad date, naming the file', () => {
    expect(() => parseRecord('x', 'no header')).toThrow('bench/results/x.md: no YAML header');
    expect(() => parseRecord('x', '---\ntitle: t\ndate: 2026-12-05\ncommand: c\nwhen: now\n---\nbody')).toThrow(
      'unknown header key "when"',
    );
    expect(() => parseRecord('x', '---\ntitle: t\ndate: yesterday\ncommand: c\n---\nbody')).toThrow(
      'is not YYYY-MM-DD',
    );
    expect(parseRecord('x', '---\ntitle: t\ndate: 2026-12-05\ncommand: npx tsx bench/scale.ts\n---\n\nbody\n')).toEqual(
      {
        slug: 'x',
        title: 't',
        date: '2026-12-05',
        command: 'npx tsx bench/scale.ts',
        kind: 'measurement',
        body: 'body',
      },
    );
    expect(commandFiles('npx tsx bench/scale.ts --sizes 100 && bash .ci/run')).toEqual(['bench/scale.ts', '.ci/run']);
    expect(commandFiles('bench/.venv-anchors/bin/python bench/anchor_greedy.py')).toEqual(['bench/anchor_greedy.py']);
  });
});

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
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
});

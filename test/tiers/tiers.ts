import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * The two tiers of the TypeScript suite. A test file that starts redis-server, the Python trainer
 * or a browser (directly or through the CLI, a worker or a plan-time token count) says so with a
 * line `// tier: slow` before its first import; it runs in `npm run test:all` only. Every other
 * file is in the fast tier (`npm test`), whose guard (`guard.mjs`) makes such a start throw.
 */
export const SLOW_MARK = /^\/\/ tier: slow\b/m;
/**
 * A multi-minute study that `npm run test:all` (and so CI) leaves out: `// tier: full` before the
 * first import. It runs in `npm run test:full`, with the trainer's tests marked `full`.
 */
export const FULL_MARK = /^\/\/ tier: full\b/m;

function testFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return testFiles(path);
    return name.endsWith('.test.ts') ? [path] : [];
  });
}

/** The header of a file: what comes before its first import. */
const header = (text: string): string => text.slice(0, Math.max(0, text.search(/^import /m)));

/** Test files (relative to `root`, POSIX separators) of each tier. */
export function tiers(root: string): { fast: string[]; slow: string[]; full: string[] } {
  const fast: string[] = [];
  const slow: string[] = [];
  const full: string[] = [];
  for (const file of testFiles(join(root, 'test')).sort()) {
    const rel = relative(root, file).split('\\').join('/');
    const head = header(readFileSync(file, 'utf8'));
    (FULL_MARK.test(head) ? full : SLOW_MARK.test(head) ? slow : fast).push(rel);
  }
  return { fast, slow, full };
}

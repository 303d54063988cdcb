import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layers of docs/architecture.md, lowest first. A module may import from its own folder or
 * from a strictly lower layer; nothing imports upward or sideways, and no file-level cycle exists.
 */
const LAYERS: string[][] = [
  ['errors', 'paths', 'layout', 'hash', 'sleep', 'random', 'pid'],
  ['log', 'fs'],
  ['schemas', 'provenance'],
  ['contracts'],
  ['codes'],
  ['grid'],
  ['manifest', 'metrics'],
  ['hub', 'runner', 'report'],
  ['datasets'],
  ['queue'],
  ['worker'],
  ['app', 'dashboard'],
  ['cli'],
];

/**
 * Barrels that still re-export with `export *`. Every other module names what it exports, so a
 * folder's `index.ts` shows its public face; these three follow once the work in flight on them
 * has landed. The list must match the code both ways.
 */
const STAR_EXPORTS = ['contracts/index.ts', 'grid/index.ts', 'metrics/index.ts'];

const SRC = fileURLToPath(new URL('../src', import.meta.url));
const DOC = fileURLToPath(new URL('../docs/architecture.md', import.meta.url));
const RANK = new Map(LAYERS.flatMap((names, rank) => names.map((n) => [n, rank] as const)));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** Every relative import (static, type-only, re-export or dynamic) of each file, as src-relative paths. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm;
  for (const file of sourceFiles(SRC)) {
    const text = readFileSync(file, 'utf8');
    const targets = [...text.matchAll(pattern)].map((m) =>
      relative(SRC, normalize(join(dirname(file), m[1] as string))).replace(/\.js$/, '.ts'),
    );
    graph.set(relative(SRC, file), targets);
  }
  return graph;
}

/** The layer unit of a src-relative path: its top folder, or the file's name for a top-level file. */
const unit = (path: string): string => path.split('/')[0]!.replace(/\.ts$/, '');

/** The folders (and top-level files) each folder of src/ imports, as docs/architecture.md tabulates them. */
function importsTable(graph: Map<string, string[]>): string {
  const uses = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    if (!file.includes('/')) continue;
    const from = unit(file);
    const set = uses.get(from) ?? new Set<string>();
    for (const target of targets) if (unit(target) !== from) set.add(unit(target));
    uses.set(from, set);
  }
  const rank = (u: string): number => RANK.get(u) ?? -1;
  const byLayer = (a: string, b: string): number => rank(b) - rank(a) || a.localeCompare(b);
  const rows = [...uses.keys()].sort(byLayer).map(
    (u) =>
      `| \`${u}\` | ${
        [...(uses.get(u) as Set<string>)]
          .sort(byLayer)
          .map((t) => `\`${t}\``)
          .join(' ') || '—'
      } |`,
  );
  return ['| folder | imports from |', '|---|---|', ...rows].join('\n');
}

describe('architecture', () => {
  const graph = importGraph();

  it('every top-level folder and file of src/ has a layer', () => {
    const units = [...new Set([...graph.keys()].map(unit))].sort();
    expect(units.filter((u) => !RANK.has(u))).toEqual([]);
  });

  it('no import goes upward or sideways', () => {
    const violations: string[] = [];
    for (const [file, targets] of graph) {
      for (const target of targets) {
        const [from, to] = [unit(file), unit(target)];
        if (from !== to && !((RANK.get(to) ?? Infinity) < (RANK.get(from) ?? -1)))
          violations.push(`${file} -> ${target}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('the file-level import graph has no cycle', () => {
    const state = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        cycles.push([...path.slice(path.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'open');
      for (const next of graph.get(file) ?? []) if (graph.has(next)) visit(next, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of graph.keys()) visit(file, []);
    expect(cycles).toEqual([]);
  });

  it('modules name what they re-export (no export *), the listed barrels aside', () => {
    const star = [...graph.keys()].filter((file) => /^\s*export\s*\*/m.test(readFileSync(join(SRC, file), 'utf8')));
    expect(star.sort()).toEqual(STAR_EXPORTS);
  });

  it('docs/architecture.md tabulates the imports the code has', () => {
    const doc = readFileSync(DOC, 'utf8');
    const table = /<!-- imports:begin -->\n([\s\S]*?)\n<!-- imports:end -->/.exec(doc)?.[1];
    expect(table, 'the table between <!-- imports:begin --> and <!-- imports:end --> in docs/architecture.md').toBe(
      importsTable(graph),
    );
  });
});

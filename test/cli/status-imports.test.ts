import { readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * What `status` loads at start-up: the modules its command module reaches through static value
 * imports (not `import type`, not `await import(...)`). The report (charts: vega, d3), the worker
 * and runner (execa, the GPU probe) and ajv cost `status` a second of start-up on a loaded
 * machine when they were loaded with it; status needs none of them.
 */
const SRC = fileURLToPath(new URL('../../src', import.meta.url));
const VALUE_IMPORT = /^(?:import|export)\s+(?!type\b)[^;]*?\bfrom\s*['"]([^'"]+)['"]/gms;

/** Every module reached from `entry` (src-relative), and for each the module that first imported it. */
function staticImports(entry: string): { reached: Map<string, string | null>; packages: Map<string, string> } {
  const reached = new Map<string, string | null>([[entry, null]]);
  const packages = new Map<string, string>();
  const queue = [entry];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    const text = readFileSync(join(SRC, file), 'utf8');
    for (const m of text.matchAll(VALUE_IMPORT)) {
      const spec = m[1] as string;
      if (!spec.startsWith('.')) {
        if (!spec.startsWith('node:') && !packages.has(spec)) packages.set(spec, file);
        continue;
      }
      const target = relative(SRC, normalize(join(dirname(join(SRC, file)), spec))).replace(/\.js$/, '.ts');
      if (reached.has(target)) continue;
      reached.set(target, file);
      queue.push(target);
    }
  }
  return { reached, packages };
}

function chain(reached: Map<string, string | null>, file: string): string {
  const path = [file];
  for (let from = reached.get(file); from; from = reached.get(from)) path.unshift(from);
  return path.join(' -> ');
}

describe('status start-up', () => {
  const { reached, packages } = staticImports('cli/status.ts');

  it('does not load the report, the manifest writer, the worker or the runner', () => {
    const heavy = [...reached.keys()].filter((f) => /^(report\/index|manifest\/|worker\/|runner\/|app\/index)/.test(f));
    expect(heavy.map((f) => chain(reached, f))).toEqual([]);
  });

  it('does not load ajv, execa or the chart packages; it does reach the queue read', () => {
    const heavy = [...packages.keys()].filter((p) => /^(ajv|execa|vega|d3|@resvg)/.test(p));
    expect(heavy.map((p) => `${chain(reached, packages.get(p) as string)} -> ${p}`)).toEqual([]);
    // The walk itself works: the modules status does need are found.
    expect(reached.has('queue/status.ts')).toBe(true);
    expect(packages.has('bullmq')).toBe(true);
  });
});

import { afterEach, describe, expect, it } from 'vitest';
import { loadGrid, parseGrid } from '../../src/grid/index.js';
import { BASE } from './helpers.js';

/** Grids too large to run are refused from a count, before a cell is built, in well under a second. */
const F = 'grid.yaml';
const list = (n: number, from = 0) => `[${Array.from({ length: n }, (_, i) => i + from).join(', ')}]`;
const withDoses = (doses: string, tail = '', axes = '') =>
  `${BASE.replace('  dose: [1, 4]', `  dose: ${doses}${axes}`)}${tail}`;

afterEach(() => {
  delete process.env.CANARY_AUDIT_MAX_CELLS;
});

function timed<T>(fn: () => T): { value: T | Error; ms: number } {
  const t0 = performance.now();
  try {
    return { value: fn(), ms: performance.now() - t0 };
  } catch (error) {
    return { value: error as Error, ms: performance.now() - t0 };
  }
}

describe('grid size limit', () => {
  it('refuses 1,000 doses x 1,000 seeds at once, with the count and the axes that make it', () => {
    parseGrid(F, BASE); // compiles the schema: the limit is about the grid, not start-up
    const { value, ms } = timed(() => parseGrid(F, withDoses(list(1000, 1), '', `\n  seed: ${list(1000)}`)));
    expect(value).toBeInstanceOf(Error);
    expect((value as Error).message).toMatch(
      /^grid\.yaml:\d+:\d+: axes: the grid makes 2,000,000 cells \(visibility 2 x dose 1000 x seed 1000\), more than the limit of 10,000 runs; .*CANARY_AUDIT_MAX_CELLS/,
    );
    expect(ms).toBeLessThan(1_000);
  });

  it('refuses 200,000 include entries before expanding any of them', () => {
    const includes = Array.from({ length: 20_001 }, (_, i) => `  - {dose: ${i + 1}}\n`).join('');
    const text = withDoses('[1]', `include:\n${includes}`);
    const { value } = timed(() => parseGrid(F, text));
    expect((value as Error).message).toMatch(/the grid makes 20,001 cells \(.*20,001 includes\), more than the limit/);
  });

  it('counts excludes: a large product cut below the limit by excludes is accepted', () => {
    process.env.CANARY_AUDIT_MAX_CELLS = '100';
    const text = withDoses(list(60, 1), 'exclude:\n  - {visibility: redacted}\n');
    expect(parseGrid(F, text).expansion.cells).toHaveLength(60);
    expect(() => parseGrid(F, withDoses(list(60, 1)))).toThrow(/makes 120 cells .* limit of 100 runs/);
  });

  it('the limit is raised with CANARY_AUDIT_MAX_CELLS', () => {
    process.env.CANARY_AUDIT_MAX_CELLS = '30000';
    expect(parseGrid(F, withDoses(list(100, 1), '', `\n  seed: ${list(100)}`)).expansion.cells).toHaveLength(20_000);
  });
});

describe('grid file size', () => {
  it('refuses a grid file larger than the parser should read (200,000 include lines), before parsing it', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const file = join(mkdtempSync(join(tmpdir(), 'canary-audit-big-')), 'big.yaml');
    writeFileSync(
      file,
      withDoses('[1]', `include:\n${Array.from({ length: 200_000 }, (_, i) => `  - {dose: ${i + 1}}\n`).join('')}`),
    );
    const t0 = performance.now();
    await expect(loadGrid(file)).rejects.toThrow(
      /big\.yaml: the grid file is [\d,]+ bytes, more than 1,048,576; list axes/,
    );
    expect(performance.now() - t0).toBeLessThan(1_000);
  });
});

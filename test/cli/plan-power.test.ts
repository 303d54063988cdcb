import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runMain } from '../queue/helpers/main.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

const root = tempDir('plan-power');
afterAll(() => removeDir(root));

const GRID = `
axes:
  visibility: [visible, redacted]
  dose: [1, 4]
  seed: [0, 1]
training:
  batch_size: 8
  updates: 40
  lr: 0.001
canaries:
  focal: 8
  held_out: 6
`;

describe('canary-audit plan --power', () => {
  it('prints one line per declared comparison after the plan; --pilot and --effect need --power', async () => {
    const grid = join(root, 'grid.yaml');
    writeFileSync(grid, GRID);
    const ok = await runMain(['plan', grid, '--power', '--effect', '3']);
    expect(ok.code, ok.stderr).toBe(0);
    const lines = ok.stdout.split('\n');
    const at = lines.findIndex((l) =>
      l.startsWith('power: 2 seed(s) per cell × 8 focal canaries per run; α 0.05, margin ±1 bits'),
    );
    expect(at).toBeGreaterThan(0);
    expect(
      lines[at + 1]?.startsWith("  variance: the tiny backend's defaults (measured: ") &&
        lines.slice(at + 2, at + 7).every((l) => /^ {2}.+ at effect \+3\.00 bits: P\(decided\) \d\.\d\d; /.test(l)),
    ).toBe(true);
    const alone = await runMain(['plan', grid, '--pilot', root]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain('--pilot and --effect go with --power; add --power');
    const bad = await runMain(['plan', grid, '--power', '--effect', 'big']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--effect must be a number of bits, got "big"');
  });
});

// tier: slow (Python: the trainer's track_verdicts)
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { trackVerdicts } from '../../src/runner/index.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

const root = tempDir('track-verdicts');
afterAll(() => removeDir(root));

function audit(name: string): { dir: string; summary: string } {
  const dir = join(root, name);
  mkdirSync(join(dir, 'report'), { recursive: true });
  const summary = join(dir, 'report', 'summary.json');
  writeFileSync(
    summary,
    JSON.stringify({
      audit: { id: 'audit-aaaaaaaaaaaa', name },
      verdicts: [
        { comparison: 'c', sentence: 's', estimate: 1, lo: 0.5, hi: 1.5, n_runs: 2, adjusted: { verdict: 'higher' } },
      ],
    }),
  );
  return { dir, summary };
}

describe('the report verdicts go to TensorBoard beside the runs', () => {
  it('writes <audit>/tensorboard/verdicts/', async () => {
    const a = audit('plain');
    const tracked = await trackVerdicts(a.summary, a.dir);
    expect(tracked).toEqual({ tensorboard: join(a.dir, 'tensorboard', 'verdicts'), wandb: false, warnings: [] });
    expect(readdirSync(tracked.tensorboard!).some((f) => f.startsWith('events.out.tfevents.'))).toBe(true);
  });

  it('a trainer Python that cannot start is one warning with a fix, not a failed report', async () => {
    const a = audit('no-python');
    const previous = process.env.CANARY_AUDIT_PYTHON;
    process.env.CANARY_AUDIT_PYTHON = join(root, 'no-such-python');
    try {
      const tracked = await trackVerdicts(a.summary, a.dir);
      expect(tracked.tensorboard).toBeNull();
      expect(tracked.warnings).toHaveLength(1);
      expect(tracked.warnings[0]).toMatch(
        /^the verdicts were not tracked: cannot start the trainer's Python: CANARY_AUDIT_PYTHON=.*no-such-python does not exist; fix: bash \.ci\/setup builds trainer-py\/\.venv, or point CANARY_AUDIT_PYTHON at /,
      );
      expect(existsSync(join(a.dir, 'tensorboard'))).toBe(false);
    } finally {
      if (previous === undefined) delete process.env.CANARY_AUDIT_PYTHON;
      else process.env.CANARY_AUDIT_PYTHON = previous;
    }
  });
});

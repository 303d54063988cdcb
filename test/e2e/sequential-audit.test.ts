// tier: slow (redis-server, the trainer)
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { validate } from '../../src/schemas/index.js';
import { hasTorch } from '../helpers/torch.js';
import { expectOutput } from '../helpers/output-schema.js';
import { runMain } from '../queue/helpers/main.js';

/**
 * Sequential replicates through the queue, CI-sized: `canary-audit run` on a one-cell grid with
 * seeds 2 to ≤3 (private redis-server, local CPU workers, the real trainer with the from-scratch
 * tiny-small model). The first look queues seeds 0-1; whether the look decides the comparison is
 * the trainer's business, so the test holds the controller to what the look read: a decided
 * comparison stops with two runs, an undecided one gets seed 2 through a second flow on the same
 * audit and stops at max. (A built audit with a known decided and a known undecided cell:
 * test/app/sequential-audit.test.ts.)
 */
const GRID = fileURLToPath(new URL('./sequential-audit.yaml', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'canary-audit-seq-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

interface SeqRecord {
  taken: string[];
  looks: { look: number; seeds: number; open: string[]; stopped: string[] }[];
  stopped: { comparison: string; reason: string; look: number; seeds: number; alpha: number; verdict: string }[];
  schedule: { look: number; seeds: number; alpha: number }[];
  done: boolean;
}

describe.skipIf(!hasTorch)('canary-audit run, sequential replicates', () => {
  it('queues the first look, reads it, and adds a seed only while the comparison is undecided', async () => {
    const artifacts = join(root, 'artifacts');
    const env = { CANARY_AUDIT_HOME: undefined, REDIS_URL: undefined, CANARY_TRAINER_CACHE: undefined };
    const result = await runMain(['run', GRID, '--cpu', '2', '--artifacts', artifacts, '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const out = expectOutput<{ audit_dir: string; counts: Record<string, number> }>('run-output', result.stdout);
    const record = JSON.parse(readFileSync(join(out.audit_dir, 'sequential.json'), 'utf8')) as SeqRecord;
    expect(record.done).toBe(true);
    expect(record.stopped).toHaveLength(1);
    const [stop] = record.stopped as [SeqRecord['stopped'][number]];
    if (stop.reason === 'decided' && stop.look === 1) {
      // Decided at the first look: no third seed was queued.
      expect(record.taken).toHaveLength(2);
      expect(out.counts).toEqual({ completed: 2 });
    } else {
      // Undecided at the first look: seed 2 joined the same audit, and the second look is the last.
      expect(record.looks.map((l) => [l.seeds, l.open.length])).toEqual([
        [2, 1],
        [3, 0],
      ]);
      expect(record.taken).toHaveLength(3);
      expect(out.counts).toEqual({ completed: 3 });
      expect(stop.look).toBe(2);
      expect(stop.reason).toBe(stop.verdict === 'undecided' ? 'max' : 'decided');
    }
    expect(stop.alpha).toBe(record.schedule[stop.look - 1]?.alpha);

    // The report: the taken runs only, the looks, and the verdict read at the stopping look's α.
    const summary = JSON.parse(readFileSync(join(out.audit_dir, 'report', 'summary.json'), 'utf8')) as {
      counts: { runs: number; finished: number };
      sequential: { looks: unknown[]; comparisons: { reason: string; look: number }[] };
      verdicts: { alpha: number; n_runs: number; sentence: string }[];
    };
    expect(validate('report', summary)).toEqual([]);
    expect(summary.counts).toMatchObject({ runs: record.taken.length, finished: record.taken.length });
    expect(summary.sequential.looks).toHaveLength(record.looks.length);
    expect(summary.sequential.comparisons).toEqual([expect.objectContaining({ reason: stop.reason, look: stop.look })]);
    expect(summary.verdicts[0]?.alpha).toBeCloseTo(stop.alpha, 12);
    expect(summary.verdicts[0]?.n_runs).toBe(stop.seeds);
    expect(summary.verdicts[0]?.sentence).toMatch(
      /sequential: look \d of 2, \d seeds, α 0\.\d{4} spent at this look\.$/,
    );
    expect(readFileSync(join(out.audit_dir, 'report', 'report.md'), 'utf8')).toContain('## Sequential looks');
  }, 240_000);
});

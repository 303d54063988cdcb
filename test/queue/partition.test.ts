// tier: full (network namespaces, 4 worker hosts, minutes)
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { removeDir, tempDir } from './helpers/fixtures.js';
import { runPartitionDrill } from './helpers/partition-drill.js';

/**
 * Partitions, not only dead processes: a Redis host and worker hosts in network namespaces the test
 * makes (root and `ip` needed; skipped otherwise). One host loses its link for longer than the lock,
 * then every host loses Redis at once; every run finishes once, with the result of an undisturbed run.
 */
const root = tempDir('partition');
afterAll(() => removeDir(root));
const canNetns = process.getuid?.() === 0 && process.platform === 'linux';

describe.skipIf(!canNetns)('network partitions', () => {
  it('a host cut off longer than the lock, then Redis cut from all hosts: every run completes once, identical', async () => {
    const report = await runPartitionDrill({
      dir: join(root, 'drill'),
      hosts: 4,
      slots: 2,
      runs: 12,
      updates: 120,
      stepS: 0.05,
      lockMs: 2_000,
      cutMs: 10_000,
      outageMs: 6_000,
    });
    expect(report.failures).toEqual([]);
    expect(report).toMatchObject({
      runs: 12,
      completed: 12,
      completedTwice: 0,
      trainedTwice: 0,
      identical: 12,
      cutTrainersAlive: 0,
    });
    expect(report.cut).toBeGreaterThan(0);
    expect(report.handedOver).toBe(report.cut);
  }, 900_000);
});

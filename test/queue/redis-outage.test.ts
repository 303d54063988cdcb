// tier: slow (redis-server)
import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { removeDir, tempDir } from './helpers/fixtures.js';
import { runOutageDrill } from './helpers/outage-drill.js';

/**
 * Redis outages longer than the job lock (scaled down: 2 s locks instead of 30 s). The rule: a worker
 * whose lock may have expired stops its trainer, which checkpoints; the worker that takes the run
 * resumes from that checkpoint (its trainer waits for the folder lock meanwhile, and a busy folder
 * spends no attempt). No run fails, no update is trained twice, results equal an undisturbed run.
 * The full 5 s / 35 s / 120 s drill with production locks: bench/redis-outage.ts.
 */
const root = tempDir('outage');
afterAll(() => removeDir(root));
// The taker's trainer gives up on the folder lock after this; the worker then tries again for free.
process.env.CANARY_TRAINER_LOCK_WAIT_S = '4';

describe('Redis outage longer than the job lock', () => {
  it('2.5x the lock: the run resumes on one trainer, no attempt spent, identical result', async () => {
    const report = await runOutageDrill({
      dir: join(root, 'x2.5'),
      lockMs: 2_000,
      outageMs: 5_000,
      runs: 1,
      updates: 400,
      stepS: 0.025,
      stopAt: 40,
    });
    expect(report).toMatchObject({ lost: 0, trainedTwice: 0, identical: 1, attemptsSpent: 0 });
  });

  it('8x the lock: the same', async () => {
    const report = await runOutageDrill({
      dir: join(root, 'x8'),
      lockMs: 1_500,
      outageMs: 12_000,
      runs: 1,
      updates: 600,
      stepS: 0.025,
      stopAt: 40,
    });
    expect(report).toMatchObject({ lost: 0, trainedTwice: 0, identical: 1, attemptsSpent: 0 });
  });

  it("the workers' event loop blocked for 2.5x the lock (Redis up): the same", async () => {
    const report = await runOutageDrill({
      dir: join(root, 'stall'),
      lockMs: 2_000,
      outageMs: 5_000,
      runs: 1,
      updates: 400,
      stepS: 0.025,
      stopAt: 40,
      disturb: 'event-loop',
    });
    expect(report).toMatchObject({ lost: 0, trainedTwice: 0, identical: 1, attemptsSpent: 0 });
  });
});

// tier: slow (redis-server, the stand-in trainer)
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStatus, openQueues, submitAudit, type EmbeddedRedis } from '../../src/queue/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { localRunner } from '../../src/runner/index.js';
import { fastTuning, removeDir, standInEnv, tempDir, waitFor, writeFixtureAudit } from './helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

const root = tempDir('submit-status');
let redis: EmbeddedRedis;
const pools: WorkerPool[] = [];

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  for (const p of pools) await p.shutdown();
  await redis?.stop();
  removeDir(root);
});

describe('submit and status under concurrency and retries', () => {
  it('of 8 concurrent identical submits exactly one says added; each job exists once', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'concurrent');
    const audit = writeFixtureAudit(artifacts, 'eight', [
      { updates: 3, cell: 'a' },
      { updates: 3, cell: 'b' },
    ]);
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, () => submitAudit(conn, artifacts, audit, fastTuning())),
    );
    expect(outcomes.filter((o) => o.added)).toHaveLength(1);
    expect(outcomes.filter((o) => !o.added).every((o) => o.existingState !== null)).toBe(true);
    const queues = openQueues(conn);
    try {
      expect(
        await queues.runs.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children'),
      ).toMatchObject({ waiting: 2 });
    } finally {
      await queues.close();
    }
  });

  it('status drops the failure of an earlier attempt once the run completed', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'retried');
    // The stand-in fails its first attempt (exit 1, retryable), then succeeds.
    const audit = writeFixtureAudit(artifacts, 'retried', [
      { updates: 3, knobs: { fail_exit: 1, fail_times: 1 }, cell: 'once' },
    ]);
    const tuning = fastTuning({ lockMs: 10_000 });
    await submitAudit(conn, artifacts, audit, tuning);
    pools.push(
      await WorkerPool.start({
        conn,
        artifactsDir: artifacts,
        runner: localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' }),
        slots: [{ gpu: null, threads: 1 }],
        tuning,
      }),
    );
    const run = await waitFor(
      'the run to complete on its second attempt',
      async () => {
        const [s] = await collectStatus(conn, audit.auditId);
        return s?.runs[0]?.state === 'completed' ? s.runs[0] : undefined;
      },
      60_000,
    );
    expect(run.attempts_made).toBe(2);
    expect(run.failure).toBeNull();
  });
});

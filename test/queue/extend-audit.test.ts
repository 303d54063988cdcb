// tier: slow (redis-server)
import { join } from 'node:path';
import { type Job, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  collectStatus,
  extendAudit,
  openQueues,
  openRedis,
  submitAudit,
  type EmbeddedRedis,
  type QueueConnection,
} from '../../src/queue/index.js';
import type { AuditJobData, AuditReturn, RunJobData, RunReturn } from '../../src/queue/job-data.js';
import { createAuditProcessor } from '../../src/worker/audit-processor.js';
import { fastTuning, removeDir, tempDir, waitFor, writeFixtureAudit } from './helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

const root = tempDir('extend-audit');
let redis: EmbeddedRedis;

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  await redis?.stop();
  removeDir(root);
});

const PROGRESS = { look: 1, seeds: 1, max: 2, undecided: 1, decided: 0, done: false };

/** Take every waiting run as a worker would and complete it; then run the audit parent's processor. */
async function finishLook(conn: QueueConnection, artifacts: string, runs: number): Promise<void> {
  const queues = openQueues(conn);
  const redisClient = openRedis(conn);
  const token = 'extend-audit';
  const runWorker = new Worker<RunJobData, RunReturn>(queues.runs.name, null, {
    connection: conn.options,
    prefix: conn.prefix,
    autorun: false,
  });
  const auditWorker = new Worker<AuditJobData, AuditReturn>(queues.audits.name, null, {
    connection: conn.options,
    prefix: conn.prefix,
    autorun: false,
  });
  try {
    for (let i = 0; i < runs; i += 1) {
      const job = await runWorker.getNextJob(token);
      if (!job) throw new Error('no run to take');
      await job.moveToCompleted({ run_id: job.data.run_id, result: 'r.json' } as RunReturn, token, false);
    }
    const parent = await waitFor('the audit parent', () => auditWorker.getNextJob(token));
    const processor = createAuditProcessor({
      artifactsDir: artifacts,
      keys: conn.keys,
      redis: redisClient,
      runs: queues.runs,
    });
    const value = await processor(parent as Job<AuditJobData, AuditReturn>);
    await (parent as Job<AuditJobData, AuditReturn>).moveToCompleted(value, token, false);
  } finally {
    await runWorker.close(true);
    await auditWorker.close(true);
    redisClient.disconnect();
    await queues.close();
  }
}

describe('extendAudit', () => {
  it("keeps the audit's summary over every look: a later parent merges the one it replaces", async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'looks');
    const audit = writeFixtureAudit(artifacts, 'looks', [
      { updates: 3, cell: 'c=0' },
      { updates: 3, cell: 'c=1' },
    ]);
    const [first, second] = audit.runs as [(typeof audit.runs)[number], (typeof audit.runs)[number]];
    await submitAudit(conn, artifacts, { ...audit, runs: [first] }, fastTuning(), { sequential: PROGRESS });
    await finishLook(conn, artifacts, 1);
    const [afterFirst] = await collectStatus(conn, audit.auditId);
    expect(afterFirst?.summary?.completed).toEqual([first.runId]);

    await extendAudit(conn, artifacts, audit, fastTuning(), { ...PROGRESS, look: 2, seeds: 2 });
    await finishLook(conn, artifacts, 1);
    const [status] = await collectStatus(conn, audit.auditId);
    expect(status?.state).toBe('finished');
    expect(status?.runs.map((r) => r.run_id).sort()).toEqual([first.runId, second.runId].sort());
    // The second parent held only the second run as a child; its summary counts both looks.
    expect(status?.summary?.completed).toEqual([first.runId, second.runId].sort());
    expect(status?.summary?.failed).toEqual([]);
  }, 30_000);
});

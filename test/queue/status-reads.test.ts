// tier: slow (redis-server)
import { join } from 'node:path';
import { type Job, UnrecoverableError, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  collectStatus,
  openQueues,
  openRedis,
  runStateOf,
  submitAudit,
  type EmbeddedRedis,
  type QueueConnection,
} from '../../src/queue/index.js';
import type { RunJobData, RunReturn } from '../../src/queue/job-data.js';
import { fastTuning, removeDir, tempDir, writeFixtureAudit } from './helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

const root = tempDir('status-reads');
let redis: EmbeddedRedis;

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  await redis?.stop();
  removeDir(root);
});

/** Calls per command that one status read of `auditId` makes, from the server's own INFO commandstats. */
async function commandsOfStatus(conn: QueueConnection, auditId: string): Promise<Map<string, number>> {
  const queues = openQueues(conn);
  const client = openRedis(conn);
  const admin = openRedis(conn);
  try {
    // Connections and their set-up commands first, so only the status read is counted.
    await collectStatus(conn, auditId, { queues, client });
    await admin.config('RESETSTAT');
    await collectStatus(conn, auditId, { queues, client });
    const info = await admin.info('commandstats');
    const calls = new Map<string, number>();
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] as string, Number(m[2]));
    // The two reads of the counters themselves.
    calls.set('info', (calls.get('info') ?? 0) - 1);
    return calls;
  } finally {
    client.disconnect();
    admin.disconnect();
    await queues.close();
  }
}

/**
 * An audit of `runs` runs submitted on its own connection, and a worker that takes its runs by hand
 * (autorun off), as a test moves them through BullMQ's states. `close` stops both.
 */
async function auditWithWorker(name: string, runs: number) {
  const conn = isolatedConnection(redis);
  const artifacts = join(root, name);
  const audit = writeFixtureAudit(
    artifacts,
    name,
    Array.from({ length: runs }, (_, i) => ({ updates: 3, cell: `c=${i}` })),
  );
  await submitAudit(conn, artifacts, audit, fastTuning());
  const queues = openQueues(conn);
  const worker = new Worker<RunJobData, RunReturn>(queues.runs.name, null, {
    connection: conn.options,
    prefix: conn.prefix,
    autorun: false,
  });
  const close = async () => {
    await worker.close(true);
    await queues.close();
  };
  return { conn, audit, queues, worker, close };
}

const total = (calls: Map<string, number>) => [...calls.values()].reduce((a, b) => a + b, 0);
/** Commands that read a whole list: once per status call, never once per run. */
const scans = (calls: Map<string, number>) =>
  (calls.get('lpos') ?? 0) + (calls.get('lrange') ?? 0) + (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);

describe('status reads', () => {
  it('cost one job read per run and a fixed number of list scans, however many runs wait', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'counts');
    const runs = (n: number, cell: string) =>
      Array.from({ length: n }, (_, i) => ({ updates: 3, cell: `${cell}=${i}` }));
    const small = writeFixtureAudit(artifacts, 'small', runs(10, 'small'));
    const large = writeFixtureAudit(artifacts, 'large', runs(160, 'large'));
    for (const audit of [small, large]) await submitAudit(conn, artifacts, audit, fastTuning());

    const smallCalls = await commandsOfStatus(conn, small.auditId);
    const largeCalls = await commandsOfStatus(conn, large.auditId);
    // The old read made ~8 commands per run (HGETALL, then a getState script of ZSCOREs and an LPOS
    // that scans the wait list): 150 more runs cost 1,200 more commands and 300 more list scans.
    expect(total(largeCalls) - total(smallCalls)).toBeLessThanOrEqual(150 + 4);
    expect(largeCalls.get('hmget')).toBe(160);
    expect(scans(largeCalls)).toBe(scans(smallCalls));
    // Only the audit parent's own state is looked up in lists (active, wait, paused of the audits queue).
    expect(largeCalls.get('lpos') ?? 0).toBeLessThanOrEqual(3);
  });

  it('gives every run the state BullMQ gives it', async () => {
    const { conn, audit, queues, worker, close } = await auditWithWorker('states', 6);
    try {
      // Take four runs as a worker would, then move them through BullMQ's own states: completed,
      // failed for good, delayed for a retry, and one left active; two stay waiting.
      const token = 'status-reads';
      const taken: Job<RunJobData, RunReturn>[] = [];
      for (let i = 0; i < 4; i += 1) {
        const job = await worker.getNextJob(token);
        if (!job) throw new Error('no job to take');
        taken.push(job);
      }
      const [done, broken, retried] = taken as [
        Job<RunJobData, RunReturn>,
        Job<RunJobData, RunReturn>,
        Job<RunJobData, RunReturn>,
      ];
      await done.moveToCompleted({ run_id: done.data.run_id, result: 'r.json' } as RunReturn, token, false);
      await broken.moveToFailed(new UnrecoverableError('boom'), token, false);
      await retried.moveToDelayed(Date.now() + 60_000, token);
      const [status] = await collectStatus(conn, audit.auditId);
      const expected = await Promise.all(
        audit.runs.map(async (r) => {
          const job = await queues.runs.getJob(r.runId);
          return job ? runStateOf(await job.getState()) : 'unknown';
        }),
      );
      expect(status?.runs.map((r) => r.state)).toEqual(expected);
      expect(new Set(expected)).toEqual(new Set(['completed', 'failed', 'delayed', 'active', 'waiting']));
    } finally {
      await close();
    }
  });

  it('reads a run still as submitted as its job says, and a run a worker touched in full', async () => {
    const { conn, audit, queues, worker, close } = await auditWithWorker('fields', 5);
    try {
      const token = 'status-fields';
      const job = await worker.getNextJob(token);
      if (!job) throw new Error('no job to take');
      const progress = { phase: 'training', host: 'h1', update: 2, total: 3, updated: Date.now() };
      await job.updateProgress(progress);
      // A failed attempt with one left: back in the queue (delayed for its backoff, then waiting),
      // its progress and failure kept: touched, though not running.
      await job.moveToFailed(new Error('lost the GPU'), token, false);
      const [status] = await collectStatus(conn, audit.auditId);
      const expected = await Promise.all(
        audit.runs.map(async (r, i) => {
          const j = await queues.runs.getJob(r.runId);
          if (!j) throw new Error(`no job ${r.runId}`);
          const state = runStateOf(await j.getState());
          return {
            run_id: r.runId,
            cell_id: audit.runs[i]?.cellId,
            state,
            attempts_made: j.attemptsMade,
            max_attempts: j.opts.attempts,
            progress: j.id === job.id ? progress : null,
            failure: j.id === job.id ? 'lost the GPU' : null,
            result: null,
            started: j.processedOn ? new Date(j.processedOn).toISOString() : null,
            finished: j.finishedOn ? new Date(j.finishedOn).toISOString() : null,
          };
        }),
      );
      expect(status?.runs).toEqual(expected);
      expect(expected.filter((r) => r.attempts_made === 1)).toHaveLength(1);
      expect(expected.every((r) => r.max_attempts === 2)).toBe(true);
    } finally {
      await close();
    }
  });
});

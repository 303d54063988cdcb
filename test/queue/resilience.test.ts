// tier: slow (redis-server, the trainer)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  collectStatus,
  openQueues,
  queueConnection,
  startEmbeddedRedis,
  submitAudit,
  type EmbeddedRedis,
  type QueueConnection,
} from '../../src/queue/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { localRunner, trainerPython } from '../../src/runner/index.js';
import { startWorker, type WorkerProcess } from './helpers/cli.js';
import {
  STAND_IN_DIR,
  fastTuning,
  removeDir,
  standInEnv,
  tempDir,
  waitFor,
  writeFixtureAudit,
} from './helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

/** Crashes the queue must survive: a worker killed -9 mid-run, and Redis restarted mid-audit. */
const root = tempDir('resilience');
let redis: EmbeddedRedis;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  for (const w of workers) w.process.kill('SIGKILL');
  await redis?.stop();
  removeDir(root);
});

type StandInResult = { stand_in: { acc: string; updates: number; attempts: { pid: number; resumed_from: number }[] } };
const readResult = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as StandInResult;

function referenceAcc(manifestPath: string, outDir: string): string {
  execFileSync(trainerPython(), ['-m', 'stand_in_trainer', 'run', '--manifest', manifestPath, '--out', outDir], {
    env: { ...process.env, PYTHONPATH: STAND_IN_DIR },
    stdio: 'ignore',
  });
  return readResult(join(outDir, 'result.json')).stand_in.acc;
}

async function finished(conn: QueueConnection, auditId: string, timeoutMs = 60_000) {
  return waitFor(
    'the audit to finish',
    async () => {
      const [audit] = await collectStatus(conn, auditId);
      return audit?.state === 'finished' ? audit : undefined;
    },
    timeoutMs,
    200,
  );
}

describe('queue resilience', () => {
  it('kill -9 of a worker mid-run: a second worker resumes from the checkpoint and ends with equal scores', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'kill');
    const knobs = { step_s: 0.03 };
    const audit = writeFixtureAudit(artifacts, 'kill9', [{ updates: 80, checkpointEvery: 10, knobs }]);
    const run = audit.runs[0]!;
    await submitAudit(conn, artifacts, audit, fastTuning());
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix };
    const args = ['--cpu', '1', '--redis', redis.url, '--artifacts', artifacts];

    const first = await startWorker(args, env);
    workers.push(first);
    const progress = await waitFor(
      'the first worker to pass a checkpoint',
      async () => {
        const [s] = await collectStatus(conn, audit.auditId);
        const p = s?.runs[0]?.progress;
        return p && p.last_checkpoint !== null && p.update >= 25 ? p : undefined;
      },
      60_000,
    );
    first.process.kill('SIGKILL');
    await first.process;
    // No worker left: status says so instead of showing a live run.
    await waitFor(
      'status to show no live worker',
      async () => (await collectStatus(conn, audit.auditId))[0]?.runs[0]?.worker_alive === false,
      20_000,
    );
    // Its trainer notices that its parent is gone, checkpoints and exits.
    await waitFor(
      'the orphaned trainer to exit',
      () => {
        try {
          process.kill(progress.trainer_pid!, 0);
          return false;
        } catch {
          return true;
        }
      },
      20_000,
    );

    const second = await startWorker(args, env);
    workers.push(second);
    const status = await finished(conn, audit.auditId);
    expect(status.runs[0]).toMatchObject({ state: 'completed', attempts_made: 1 });
    expect(status.runs[0]?.progress?.worker_pid).toBe(second.process.pid);
    second.process.kill('SIGTERM');
    expect((await second.process).exitCode).toBe(0);

    const result = readResult(join(run.manifestPath, '..', 'output', 'result.json'));
    expect(result.stand_in.attempts).toHaveLength(2);
    expect(result.stand_in.attempts[1]!.resumed_from).toBeGreaterThanOrEqual(progress.last_checkpoint!);
    expect(result.stand_in.updates).toBe(80);
    expect(result.stand_in.acc).toBe(referenceAcc(run.manifestPath, join(root, 'kill-reference')));
  });

  it('restarting Redis mid-audit (append-only file) loses no job and no result', async () => {
    const dir = join(root, 'restart');
    let server = await startEmbeddedRedis({ dir: join(dir, 'redis') });
    const port = server.port;
    const conn = queueConnection(server, 'restart');
    const artifacts = join(dir, 'artifacts');
    const audit = writeFixtureAudit(
      artifacts,
      'restart',
      [0, 1, 2, 3, 4, 5].map((i) => ({ updates: 30 + i, knobs: { step_s: 0.02 } })),
    );
    // Locks outlive the restart, as in production (30 s locks, Redis back in well under that).
    const tuning = fastTuning({ lockMs: 8_000, stalledMs: 2_000 });
    await submitAudit(conn, artifacts, audit, tuning);
    const pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' }),
      slots: [
        { gpu: null, threads: 1 },
        { gpu: null, threads: 1 },
      ],
      tuning,
    });
    try {
      await waitFor(
        'a run to complete and others to be running',
        async () => {
          const [s] = await collectStatus(conn, audit.auditId);
          return (s?.counts.completed ?? 0) >= 1 && (s?.counts.active ?? 0) >= 1;
        },
        60_000,
      );
      await server.stop();
      await new Promise((r) => setTimeout(r, 500));
      server = await startEmbeddedRedis({ dir: join(dir, 'redis'), port });
      const status = await finished(conn, audit.auditId);
      expect(status.counts).toEqual({ completed: 6 });
      expect(status.runs.every((r) => r.attempts_made === 1)).toBe(true);
      const queues = openQueues(conn);
      try {
        expect(await queues.runs.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed')).toMatchObject({
          completed: 6,
          failed: 0,
          waiting: 0,
          active: 0,
          delayed: 0,
        });
        for (const run of audit.runs) {
          const job = await queues.runs.getJob(run.runId);
          expect(job?.returnvalue?.result).toBe(`audits/${audit.auditId}/runs/${run.runId}/output/result.json`);
          const result = readResult(join(run.manifestPath, '..', 'output', 'result.json'));
          expect(result.stand_in.updates).toBeGreaterThanOrEqual(30);
        }
      } finally {
        await queues.close();
      }
    } finally {
      await pool.shutdown();
      await server.stop();
    }
  });
});

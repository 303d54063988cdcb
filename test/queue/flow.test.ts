// tier: slow (redis-server, the trainer)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelAudit,
  collectStatus,
  RUN_JOB,
  openQueues,
  submitAudit,
  type EmbeddedRedis,
  type QueueConnection,
  type RunReturn,
} from '../../src/queue/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { localRunner, trainerPython } from '../../src/runner/index.js';
import { fastTuning, removeDir, standInEnv, tempDir, waitFor, writeFixtureAudit } from './helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

/**
 * The queue end to end inside one process: real redis-server, BullMQ flows, in-process workers
 * running the stand-in trainer.
 */
const root = tempDir('flow');
let redis: EmbeddedRedis;
const pools: WorkerPool[] = [];
const runner = () => localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' });

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  for (const pool of pools) await pool.shutdown();
  await redis?.stop();
  removeDir(root);
});

async function startPool(conn: QueueConnection, artifactsDir: string, slots = 2): Promise<WorkerPool> {
  const pool = await WorkerPool.start({
    conn,
    artifactsDir,
    runner: runner(),
    slots: Array.from({ length: slots }, () => ({ gpu: null, threads: 1 })),
    tuning: fastTuning(),
    cancelPollMs: 500,
  });
  pools.push(pool);
  return pool;
}

async function finished(conn: QueueConnection, auditId: string) {
  return waitFor('the audit to finish', async () => {
    const [audit] = await collectStatus(conn, auditId);
    // A cancelled audit reads as cancelled once nothing runs; its summary lands when a worker
    // closes the audit parent a moment later, so wait for both.
    return audit && (audit.state === 'finished' || audit.state === 'cancelled') && audit.summary ? audit : undefined;
  });
}

describe('audit flow', () => {
  it('submit -> worker -> result; a second submit adds nothing', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'a1');
    const audit = writeFixtureAudit(artifacts, 'basic', [{ updates: 8 }, { updates: 6 }]);
    const first = await submitAudit(conn, artifacts, audit, fastTuning());
    expect(first).toMatchObject({ added: true, runs: 2 });
    const again = await submitAudit(conn, artifacts, audit, fastTuning());
    expect(again).toMatchObject({ added: false, existingState: 'queued' });

    const queues = openQueues(conn);
    try {
      expect(await queues.runs.getJobCounts('waiting')).toMatchObject({ waiting: 2 });
      await startPool(conn, artifacts);
      const status = await finished(conn, audit.auditId);
      expect(status.counts).toEqual({ completed: 2 });
      for (const run of audit.runs) {
        const job = await queues.runs.getJob(run.runId);
        const value = job?.returnvalue as RunReturn;
        expect(value.result).toBe(`audits/${audit.auditId}/runs/${run.runId}/output/result.json`);
        expect(existsSync(join(artifacts, value.result))).toBe(true);
        expect(value.reused).toBe(false);
        const { logs } = await queues.runs.getJobLogs(run.runId);
        expect(logs.some((l) => l.startsWith('started pid='))).toBe(true);
        expect(logs.some((l) => l.startsWith('trainer exit 0: ok'))).toBe(true);
      }
      const run0 = status.runs[0];
      expect(run0?.progress).toMatchObject({
        host: expect.any(String),
        gpu: null,
        attempt: 1,
        phase: 'finishing',
        total: 8,
      });
      expect(status.summary?.completed).toHaveLength(2);

      // Submitting a finished audit again adds nothing either.
      expect(await submitAudit(conn, artifacts, audit, fastTuning())).toMatchObject({
        added: false,
        existingState: 'finished',
      });
      expect(await queues.runs.getJobCounts('waiting', 'completed')).toMatchObject({ waiting: 0, completed: 2 });
    } finally {
      await queues.close();
    }
  });

  it('a failing run leaves the others finishing; crashes are retried, bad input is not', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'a2');
    const audit = writeFixtureAudit(artifacts, 'failures', [
      { updates: 5, knobs: { fail_exit: 2 }, cell: 'bad' },
      { updates: 5, knobs: { fail_exit: 1, fail_times: 1 }, cell: 'flaky' },
      { updates: 5, knobs: { fail_exit: 1 }, cell: 'broken' },
      { updates: 5, cell: 'good' },
    ]);
    await submitAudit(conn, artifacts, audit, fastTuning());
    await startPool(conn, artifacts);
    const status = await finished(conn, audit.auditId);
    const byCell = Object.fromEntries(status.runs.map((r) => [r.cell_id, r]));
    expect(byCell.bad).toMatchObject({
      state: 'failed',
      attempts_made: 1,
      failure: 'bad_manifest: planned failure (exit 2)',
    });
    expect(byCell.flaky).toMatchObject({ state: 'completed', attempts_made: 2 });
    expect(byCell.broken).toMatchObject({ state: 'failed', attempts_made: 2 });
    expect(byCell.good).toMatchObject({ state: 'completed', attempts_made: 1 });
    expect(status.summary?.failed.map((f) => f.run_id).sort()).toEqual(
      [byCell.bad?.run_id, byCell.broken?.run_id].sort(),
    );

    const failure = (runId: string) =>
      JSON.parse(readFileSync(join(audit.auditDir, 'runs', runId, 'output', 'failure.json'), 'utf8')) as Record<
        string,
        unknown
      >;
    expect(failure(byCell.bad!.run_id)).toMatchObject({
      kind: 'bad_manifest',
      attempts: 1,
      message: 'planned failure (exit 2)',
    });
    expect(failure(byCell.broken!.run_id)).toMatchObject({ kind: 'internal', attempts: 2 });
    expect(existsSync(join(audit.auditDir, 'runs', byCell.flaky!.run_id, 'output', 'failure.json'))).toBe(false);
  });

  it('cancel stops a running trainer, removes waiting runs, and status says so', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'a3');
    const audit = writeFixtureAudit(artifacts, 'cancel', [
      { updates: 100_000, knobs: { step_s: 0.01 }, cell: 'long' },
      { updates: 5, cell: 'queued' },
    ]);
    await submitAudit(conn, artifacts, audit, fastTuning());
    await startPool(conn, artifacts, 1);
    const long = audit.runs[0]!;
    const running = await waitFor('the long run to train', async () => {
      const [s] = await collectStatus(conn, audit.auditId);
      const run = s?.runs.find((r) => r.run_id === long.runId);
      return run?.state === 'active' && (run.progress?.update ?? 0) > 3 ? run : undefined;
    });
    expect(running.progress?.trainer_pid).toEqual(expect.any(Number));
    const trainerPid = running.progress!.trainer_pid!;

    const outcome = await cancelAudit(conn, audit.auditId, artifacts);
    expect(outcome.stopping).toEqual([long.runId]);
    expect(outcome.removed).toEqual([audit.runs[1]!.runId]);

    const status = await finished(conn, audit.auditId);
    expect(status.state).toBe('cancelled');
    expect(status.cancelled_at).toBe(outcome.cancelledAt);
    expect(status.runs.map((r) => r.state)).toEqual(['cancelled', 'cancelled']);
    expect(status.runs[0]?.failure).toMatch(/^cancelled: cancelled while running/);
    expect(() => process.kill(trainerPid, 0)).toThrow(); // the trainer process is gone
    const out = join(audit.auditDir, 'runs', long.runId, 'output');
    expect(existsSync(join(out, 'checkpoints', 'state.json'))).toBe(true); // it checkpointed on the way out
    expect(JSON.parse(readFileSync(join(out, 'failure.json'), 'utf8'))).toMatchObject({ kind: 'cancelled' });
    // One accounting: both runs are cancelled in the summary too (none counted as failed).
    expect(status.summary?.cancelled).toEqual([long.runId, audit.runs[1]!.runId].sort());
    expect(status.summary?.failed).toEqual([]);
    // Cancelling twice keeps the first time.
    expect((await cancelAudit(conn, audit.auditId, artifacts)).cancelledAt).toBe(outcome.cancelledAt);
  });

  it('refuses a job whose manifest path leaves the artifact root, without retrying it', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'a5');
    const audit = writeFixtureAudit(artifacts, 'escape', [{ updates: 1 }]);
    const queues = openQueues(conn);
    try {
      await queues.runs.add(
        RUN_JOB,
        { audit_id: audit.auditId, run_id: 'run-00000000000000ee', cell_id: 'evil', manifest: '../../../etc/passwd' },
        { jobId: 'run-00000000000000ee', attempts: 3 },
      );
      await startPool(conn, artifacts, 1);
      const job = await waitFor('the job to fail', async () => {
        const j = await queues.runs.getJob('run-00000000000000ee');
        // Re-read after the state check: a snapshot taken just before the failure lacks its reason.
        return j && (await j.isFailed()) ? queues.runs.getJob('run-00000000000000ee') : undefined;
      });
      expect(job.failedReason).toMatch(
        /^bad_job: artifact path "\.\.\/\.\.\/\.\.\/etc\/passwd" leaves the artifact root/,
      );
      expect(job.attemptsMade).toBe(1);
    } finally {
      await queues.close();
    }
  });

  it('shutdown puts a running job back without spending an attempt; the next worker resumes it', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'a4');
    const audit = writeFixtureAudit(artifacts, 'shutdown', [
      { updates: 60, checkpointEvery: 1000, knobs: { step_s: 0.02 } },
    ]);
    const reference = writeFixtureAudit(join(root, 'a4-ref'), 'shutdown', [
      { updates: 60, checkpointEvery: 1000, knobs: { step_s: 0.02 } },
    ]);
    await submitAudit(conn, artifacts, audit, fastTuning());
    const pool = await startPool(conn, artifacts, 1);
    await waitFor('training to start', async () => {
      const [s] = await collectStatus(conn, audit.auditId);
      return (s?.runs[0]?.progress?.update ?? 0) >= 10;
    });
    const t0 = Date.now();
    await pool.shutdown();
    expect(Date.now() - t0).toBeLessThan(fastTuning().stopGraceMs);

    const [waiting] = await collectStatus(conn, audit.auditId);
    expect(waiting?.runs[0]).toMatchObject({ state: 'waiting', attempts_made: 0 });
    await startPool(conn, artifacts, 1);
    const status = await finished(conn, audit.auditId);
    expect(status.runs[0]).toMatchObject({ state: 'completed', attempts_made: 1 });

    // The second attempt resumed from the checkpoint written at shutdown, and ended where an
    // uninterrupted run ends.
    const result = JSON.parse(
      readFileSync(join(audit.auditDir, 'runs', audit.runs[0]!.runId, 'output', 'result.json'), 'utf8'),
    ) as {
      stand_in: { acc: string; attempts: { resumed_from: number }[] };
    };
    expect(result.stand_in.attempts).toHaveLength(2);
    expect(result.stand_in.attempts[1]!.resumed_from).toBeGreaterThanOrEqual(10);
    const { execFileSync } = await import('node:child_process');
    const refRun = reference.runs[0]!;
    execFileSync(
      trainerPython(),
      ['-m', 'stand_in_trainer', 'run', '--manifest', refRun.manifestPath, '--out', join(reference.auditDir, 'out')],
      {
        env: { ...process.env, PYTHONPATH: standInEnv().CANARY_AUDIT_TRAINER_PATH },
        stdio: 'ignore',
      },
    );
    const ref = JSON.parse(readFileSync(join(reference.auditDir, 'out', 'result.json'), 'utf8')) as {
      stand_in: { acc: string };
    };
    expect(result.stand_in.acc).toBe(ref.stand_in.acc);
  });
});

// tier: slow (redis-server)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelAudit,
  collectStatus,
  submitAudit,
  type AuditStatus,
  type EmbeddedRedis,
  type RunStatus,
} from '../../src/queue/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { localRunner } from '../../src/runner/index.js';
import { fastTuning, removeDir, standInEnv, tempDir, waitFor, writeFixtureAudit } from '../queue/helpers/fixtures.js';
import { runMain } from '../queue/helpers/main.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';
import { expectOutput } from '../helpers/output-schema.js';

const root = tempDir('cli-status');
let redis: EmbeddedRedis;
let pool: WorkerPool | undefined;

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  await pool?.shutdown();
  await redis?.stop();
  removeDir(root);
});

describe('canary-audit status', () => {
  it('--json reflects completed, failed, active (with progress), waiting, then cancelled runs', async () => {
    const conn = isolatedConnection(redis);
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix, REDIS_URL: redis.url };
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(artifacts, 'states', [
      { updates: 3, cell: 'done' },
      { updates: 3, knobs: { fail_exit: 3 }, cell: 'diverges' },
      { updates: 100_000, knobs: { step_s: 0.01 }, cell: 'long' },
      { updates: 3, cell: 'queued' },
    ]);
    // A 10 s lock: this test is about what status shows, not about lost locks, and a loaded CI
    // machine can stall the event loop past fastTuning's 2 s lock (then the lease rule hands the
    // run back, which test/queue/redis-outage.test.ts covers).
    const tuning = fastTuning({ lockMs: 10_000 });
    await submitAudit(conn, artifacts, audit, tuning);

    const queued = await runMain(['status', audit.auditId, '--json'], env);
    expect(queued.code).toBe(0);
    const before = expectOutput<{ audits: AuditStatus[] }>('status-output', queued.stdout).audits[0]!;
    expect(before).toMatchObject({ audit_id: audit.auditId, name: 'states', state: 'queued', counts: { waiting: 4 } });

    // One slot takes the runs in order: done, diverges, then long keeps it busy.
    pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' }),
      slots: [{ gpu: null, threads: 1 }],
      tuning,
    });
    await waitFor('the long run to report progress', async () => {
      const [s] = await collectStatus(conn, audit.auditId);
      return (s?.runs[2]?.progress?.update ?? 0) > 5;
    });

    const during = await runMain(['status', audit.auditId, '--json'], env);
    const snapshot = expectOutput<{ audits: AuditStatus[] }>('status-output', during.stdout).audits[0]!;
    const byCell = Object.fromEntries(snapshot.runs.map((r) => [r.cell_id, r])) as Record<string, RunStatus>;
    expect(snapshot.state).toBe('running');
    expect(byCell.done).toMatchObject({
      state: 'completed',
      attempts_made: 1,
      result: `audits/${audit.auditId}/runs/${byCell.done!.run_id}/output/result.json`,
    });
    expect(byCell.diverges).toMatchObject({
      state: 'failed',
      failure: 'diverged: planned failure (exit 3)',
      attempts_made: 1,
    });
    expect(byCell.long).toMatchObject({
      state: 'active',
      attempts_made: 0,
      progress: { phase: 'training', total: 100_000, gpu: null, worker_pid: process.pid, attempt: 1 },
    });
    expect(byCell.long!.progress!.rows_per_s).toBeGreaterThan(0);
    expect(byCell.long!.progress!.eta_s).toBeGreaterThan(0);
    expect(byCell.queued).toMatchObject({ state: 'waiting' });

    const plain = await runMain(['status', audit.auditId], env);
    expect(plain.stdout).toMatch(
      /^audit-[0-9a-f]{12} {2}states {2}running {2}4 runs: 1 active, 1 waiting, 1 completed, 1 failed {2}audit ETA \S+$/m,
    );
    expect(plain.stdout).toMatch(/diverges +failed .*attempt 1\/2 {2}diverged: planned failure \(exit 3\)$/m);
    expect(plain.stdout).toMatch(
      /long +active +\d+\/100000 {2}loss [\d.]+ {2}[\d.]+ rows\/s {2}ETA \S+ {2}\S+ cpu {2}attempt 1\/2$/m,
    );

    await cancelAudit(conn, audit.auditId, artifacts);
    // --watch on one audit returns once it is done; with --json it prints one snapshot per line.
    const watched = await runMain(['status', audit.auditId, '--watch', '--interval', '1', '--json'], env);
    expect(watched.code).toBe(0);
    const lines = watched.stdout
      .trim()
      .split('\n')
      .map((l) => expectOutput<{ audits: AuditStatus[]; time: string }>('status-output', l));
    expect(lines.every((l) => typeof l.time === 'string')).toBe(true);
    const last = lines.at(-1)!.audits[0]!;
    expect(last.state).toBe('cancelled');
    expect(last.counts, JSON.stringify(last.runs.map((r) => [r.cell_id, r.state, r.failure]))).toEqual({
      completed: 1,
      failed: 1,
      cancelled: 2,
    });
    // The audit parent closes the audit once its last run has stopped.
    const closed = await waitFor(
      'the audit summary',
      async () => (await collectStatus(conn, audit.auditId))[0]?.summary ?? undefined,
    );
    // One accounting: the run stopped while training is cancelled in the summary, as in status.
    expect(closed).toMatchObject({
      completed: [byCell.done!.run_id],
      cancelled: [byCell.queued!.run_id, byCell.long!.run_id].sort(),
    });
    expect(closed.failed.map((f) => f.run_id)).toEqual([byCell.diverges!.run_id]);

    const all = await runMain(['status', '--json'], env);
    expect(expectOutput<{ audits: AuditStatus[] }>('status-output', all.stdout).audits.map((a) => a.audit_id)).toEqual([
      audit.auditId,
    ]);
  });

  it('names an unknown audit (exit 2)', async () => {
    const result = await runMain(['status', 'audit-000000000000', '--redis', redis.url]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^canary-audit: no audit "audit-000000000000" on this Redis \(redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/0\); run `canary-audit status` to list audits\n$/,
    );
  });

  it('lists audits on disk that the queue lost, with the command that submits them again', async () => {
    const conn = isolatedConnection(redis); // an empty queue: as after a restart without the append-only file
    const artifacts = join(root, 'lost');
    const audit = writeFixtureAudit(artifacts, 'lost', [{ updates: 3 }]);
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix, REDIS_URL: redis.url };
    const plain = await runMain(['status', '--artifacts', artifacts], env);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toContain(
      'no audits in the queue\n1 audit(s) under the artifact root are not on this Redis (redis://:***@',
    );
    expect(plain.stdout).toContain(
      `  ${audit.auditId} (lost): it was queued on another Redis, or this one lost it (restarted without its append-only file, or purged); to queue it here: npx canary-audit submit ${audit.auditDir} (`,
    );
    const json = JSON.parse((await runMain(['status', '--json', '--artifacts', artifacts], env)).stdout) as {
      not_queued: unknown[];
    };
    expect(json.not_queued).toEqual([{ audit_id: audit.auditId, name: 'lost', dir: audit.auditDir }]);
    const one = await runMain(['status', audit.auditId, '--artifacts', artifacts], env);
    expect(one.code).toBe(2);
    expect(one.stderr).toMatch(
      new RegExp(
        `^canary-audit: no audit ${audit.auditId} on this Redis \\(redis://:\\*\\*\\*@[^)]+\\); it is on disk at ${audit.auditDir}: it was queued on another Redis, or this one lost it`,
      ),
    );
    // An audit `run` ran on its own private Redis says so, not "lost".
    mkdirSync(join(audit.auditDir, 'redis'), { recursive: true });
    writeFileSync(join(audit.auditDir, 'redis', 'redis.conf'), 'port 0\n');
    const own = await runMain(['status', audit.auditId, '--artifacts', artifacts], env);
    expect(own.stderr).toContain(
      `on disk at ${audit.auditDir}: \`canary-audit run\` ran it on its own private Redis (${join(audit.auditDir, 'redis')}), not this one;`,
    );
    expect(own.stderr).not.toContain('this one lost it');
  });
});

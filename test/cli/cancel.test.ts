// tier: slow (redis-server)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStatus, submitAudit, type EmbeddedRedis } from '../../src/queue/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { localRunner } from '../../src/runner/index.js';
import { fastTuning, removeDir, standInEnv, tempDir, waitFor, writeFixtureAudit } from '../queue/helpers/fixtures.js';
import { runMain } from '../queue/helpers/main.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';
import { expectOutput } from '../helpers/output-schema.js';

const root = tempDir('cli-cancel');
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

describe('canary-audit cancel', () => {
  it('stops the running trainer, removes waiting runs, records it; --purge lets the grid be submitted again', async () => {
    const conn = isolatedConnection(redis);
    const env = { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix, REDIS_URL: redis.url, CANARY_AUDIT_STOP_GRACE_MS: '5000' };
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(artifacts, 'cancel', [
      { updates: 100_000, knobs: { step_s: 0.01 }, cell: 'running' },
      { updates: 3, cell: 'waiting' },
    ]);
    await submitAudit(conn, artifacts, audit, fastTuning());
    pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' }),
      slots: [{ gpu: null, threads: 1 }],
      tuning: fastTuning(),
    });
    const [running, waiting] = audit.runs;
    const trainerPid = await waitFor('training', async () => {
      const [s] = await collectStatus(conn, audit.auditId);
      const p = s?.runs[0]?.progress;
      return p && p.update > 3 ? p.trainer_pid : undefined;
    });

    const cancelled = await runMain(['cancel', audit.auditId, '--artifacts', artifacts, '--json'], env);
    expect(cancelled.code).toBe(0);
    const out = expectOutput('cancel-output', cancelled.stdout);
    expect(out).toMatchObject({
      audit_id: audit.auditId,
      removed: [waiting!.runId],
      stopping: [running!.runId],
      finished: [],
      still_running: [],
      purged: false,
    });
    expect(() => process.kill(trainerPid!, 0)).toThrow();
    const failure = (runId: string) =>
      JSON.parse(readFileSync(join(audit.auditDir, 'runs', runId, 'output', 'failure.json'), 'utf8')) as Record<
        string,
        unknown
      >;
    expect(failure(waiting!.runId)).toMatchObject({ kind: 'cancelled', attempts: 0 });
    await waitFor('the running run to record its cancellation', () =>
      existsSync(join(audit.auditDir, 'runs', running!.runId, 'output', 'failure.json')),
    );
    expect(failure(running!.runId)).toMatchObject({ kind: 'cancelled', attempts: 1 });

    const purge = await runMain(['cancel', audit.auditId, '--purge'], env);
    expect(purge.code).toBe(0);
    expect(purge.stdout).toMatch(/0 waiting run\(s\) removed, 0 running run\(s\) stopped, 1 already finished/);
    expect(purge.stdout).toMatch(/removed audit-[0-9a-f]{12} and its runs from the queue \(artifacts kept\)/);
    expect(await submitAudit(conn, artifacts, audit, fastTuning())).toMatchObject({ added: true });

    const unknown = await runMain(['cancel', 'audit-ffffffffffff'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^canary-audit: no audit "audit-ffffffffffff" in the queue/);
  });
});

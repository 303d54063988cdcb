// tier: slow (redis-server)
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStatus, openQueues, submitAudit, type EmbeddedRedis } from '../../src/queue/index.js';
import { startWorker, type WorkerProcess } from '../queue/helpers/cli.js';
import { runMain } from '../queue/helpers/main.js';
import { fastTuning, removeDir, tempDir, waitFor, writeFixtureAudit } from '../queue/helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from '../queue/helpers/redis.js';

const root = tempDir('cli-worker');
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

describe('canary-audit worker', () => {
  it('on SIGTERM: the trainer checkpoints, the run goes back to the queue unspent, the worker exits 0 in time', async () => {
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'sigterm');
    const audit = writeFixtureAudit(artifacts, 'sigterm', [
      { updates: 100_000, checkpointEvery: 100_000, knobs: { step_s: 0.01 } },
    ]);
    await submitAudit(conn, artifacts, audit, fastTuning());
    const worker = await startWorker(['--cpu', '1', '--redis', redis.url, '--artifacts', artifacts], {
      CANARY_AUDIT_QUEUE_PREFIX: conn.prefix,
    });
    workers.push(worker);
    const running = await waitFor('training', async () => {
      const [s] = await collectStatus(conn, audit.auditId);
      const run = s?.runs[0];
      return run?.state === 'active' && (run.progress?.update ?? 0) > 5 ? run : undefined;
    });
    expect(running.progress).toMatchObject({ worker_pid: worker.process.pid, gpu: null, attempt: 1 });

    const t0 = Date.now();
    worker.process.kill('SIGTERM');
    const exit = await worker.process;
    const elapsed = Date.now() - t0;
    expect(exit.exitCode).toBe(0);
    expect(elapsed).toBeLessThan(5_000 + 15_000); // stop grace + margin (documented bound)

    const [after] = await collectStatus(conn, audit.auditId);
    expect(after?.runs[0]).toMatchObject({ state: 'waiting', attempts_made: 0 });
    const queues = openQueues(conn);
    try {
      const { logs } = await queues.runs.getJobLogs(audit.runs[0]!.runId);
      expect(logs).toContain('stopping trainer (shutdown)');
      expect(logs.some((l) => l.startsWith('returned to the queue: worker shutdown'))).toBe(true);
    } finally {
      await queues.close();
    }
    const state = JSON.parse(
      readFileSync(join(audit.runs[0]!.manifestPath, '..', 'output', 'checkpoints', 'state.json'), 'utf8'),
    ) as { update: number };
    expect(state.update).toBeGreaterThanOrEqual(running.progress!.update);
  });

  it('rejects bad flags in one line with exit 2, and names a missing artifact root', async () => {
    const bad = await runMain(['worker', '--gpus', '0,zero', '--redis', redis.url, '--artifacts', root]);
    const both = await runMain(['worker', '--gpus', '0', '--cpu', '2', '--redis', redis.url, '--artifacts', root]);
    const noRoot = await runMain(['worker', '--cpu', '1', '--redis', redis.url, '--artifacts', join(root, 'missing')]);
    const noRedis = await runMain(['worker', '--cpu', '1', '--artifacts', root], { REDIS_URL: undefined });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^canary-audit: --gpus: "zero" in "0,zero" is not a GPU index or UUID; e.g. --gpus 0,1$/m,
    );
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--gpus and --cpu exclude each other/);
    expect(noRoot.code).toBe(2);
    expect(noRoot.stderr).toMatch(/artifact root .*missing does not exist/);
    expect(noRedis.code).toBe(2);
    expect(noRedis.stderr).toMatch(/no Redis given: set REDIS_URL or pass --redis/);
  });
});

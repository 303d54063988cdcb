// tier: slow (redis-server, the worker CLI, the stand-in trainer)
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { collectStatus, startEmbeddedRedis, submitAudit, type EmbeddedRedis } from '../../src/queue/index.js';
import { queueConnection } from '../../src/queue/index.js';
import { SHUTDOWN_MARGIN_MS } from '../../src/worker/index.js';
import { startWorker, type WorkerProcess } from '../queue/helpers/cli.js';
import { fastTuning, removeDir, tempDir, waitFor, writeFixtureAudit } from '../queue/helpers/fixtures.js';

/**
 * A worker stops within --stop-grace-s + SHUTDOWN_MARGIN_MS of SIGTERM whatever Redis does: gone
 * (its connections reconnecting: BullMQ's graceful close waited for an 'end' event ioredis never
 * emits then, so the worker hung for ever) or up but silent (SIGSTOP). A second signal exits at once.
 */
const root = tempDir('shutdown');
const servers: EmbeddedRedis[] = [];
const workers: WorkerProcess[] = [];
const pids: number[] = [];
afterAll(async () => {
  for (const w of workers) w.process.kill('SIGKILL');
  for (const pid of pids) signal(pid, 'SIGKILL');
  for (const s of servers) {
    signal(s.pid, 'SIGCONT');
    await s.stop().catch(() => signal(s.pid, 'SIGKILL'));
  }
  removeDir(root);
});

const STOP_GRACE_S = 5;
const BOUND_MS = STOP_GRACE_S * 1000 + SHUTDOWN_MARGIN_MS;

function signal(pid: number, name: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch {
    return false;
  }
}

/** A worker (one CPU slot, 10 s locks) training one long stand-in run; resolves with its trainer's pid. */
async function workerTraining(name: string, knobs: Record<string, unknown> = {}) {
  const redis = await startEmbeddedRedis({ dir: join(root, name, 'redis') });
  servers.push(redis);
  const conn = queueConnection(redis, `shutdown-${name}`);
  const artifacts = join(root, name, 'artifacts');
  const audit = writeFixtureAudit(artifacts, name, [
    { updates: 2000, checkpointEvery: 10, knobs: { step_s: 0.02, ...knobs } },
  ]);
  await submitAudit(conn, artifacts, audit, fastTuning());
  const worker = await startWorker(
    ['--cpu', '1', '--redis', redis.url, '--artifacts', artifacts, '--stop-grace-s', String(STOP_GRACE_S)],
    { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix, CANARY_AUDIT_LOCK_MS: '10000' },
  );
  workers.push(worker);
  const trainerPid = await waitFor(
    'the run to train',
    async () => {
      const p = (await collectStatus(conn, audit.auditId))[0]?.runs[0]?.progress;
      return p && p.update >= 3 ? p.trainer_pid : undefined;
    },
    60_000,
    100,
  );
  if (typeof trainerPid === 'number') pids.push(trainerPid);
  return { redis, worker, trainerPid };
}

// Signals go by process.kill: execa's kill() would add its own SIGKILL 5 s later.
/** ms from now until the worker exits, or null when it is still running after `ms`. */
async function exitWithin(worker: WorkerProcess, ms: number): Promise<number | null> {
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const exited = await Promise.race([
    worker.process.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]);
  clearTimeout(timer);
  return exited ? performance.now() - t0 : null;
}

describe('worker shutdown is bounded whatever Redis does', () => {
  it('Redis gone (killed) mid-run: one SIGTERM, the worker exits without waiting for it', async () => {
    const { redis, worker, trainerPid } = await workerTraining('gone');
    signal(redis.pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    signal(worker.process.pid as number, 'SIGTERM');
    const ms = await exitWithin(worker, BOUND_MS + 2_000);
    expect(ms, `worker still running ${BOUND_MS + 2_000} ms after SIGTERM:\n${worker.output()}`).not.toBeNull();
    expect(ms).toBeLessThan(BOUND_MS);
    expect((await worker.process).exitCode).toBe(0);
    expect(worker.output()).toMatch(
      /stopped in [\d.]+ s; Redis connection \w+: connections force-closed; 1 run not handed back \(run-\w+\) goes back to the queue when its lock expires/,
    );
    // The trainer checkpointed and exited on the worker's SIGTERM.
    expect(signal(trainerPid as number, 0)).toBe(false);
  });

  it('Redis silent (SIGSTOP) mid-run: the same', async () => {
    const { redis, worker, trainerPid } = await workerTraining('silent');
    signal(redis.pid, 'SIGSTOP');
    signal(worker.process.pid as number, 'SIGTERM');
    const ms = await exitWithin(worker, BOUND_MS + 2_000);
    signal(redis.pid, 'SIGCONT');
    expect(ms, `worker still running ${BOUND_MS + 2_000} ms after SIGTERM:\n${worker.output()}`).not.toBeNull();
    expect(ms).toBeLessThan(BOUND_MS);
    expect((await worker.process).exitCode).toBe(0);
    expect(worker.output()).toMatch(
      /Redis did not answer PING within 2 s: connections force-closed; 1 run not handed back/,
    );
    expect(signal(trainerPid as number, 0)).toBe(false);
  });

  it('a second signal exits at once, even while a trainer ignores SIGTERM', async () => {
    const { worker } = await workerTraining('twice', { ignore_sigterm: true });
    signal(worker.process.pid as number, 'SIGTERM');
    await new Promise((r) => setTimeout(r, 500));
    signal(worker.process.pid as number, 'SIGINT');
    const ms = await exitWithin(worker, 3_000);
    expect(ms, worker.output()).not.toBeNull();
    expect((await worker.process).exitCode).toBe(1);
    expect(worker.output()).toContain('second signal (SIGINT): exiting now');
  });
});

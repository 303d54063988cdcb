// tier: slow (redis-server, the stand-in trainer)
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { collectStatus, queueConnection, startEmbeddedRedis, submitAudit } from '../../src/queue/index.js';
import { RUNS_QUEUE } from '../../src/queue/names.js';
import { localRunner, trainerPython } from '../../src/runner/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { fastTuning, removeDir, STAND_IN_DIR, tempDir, waitFor, writeFixtureAudit } from './helpers/fixtures.js';
import { trainedTwice } from './helpers/outage-drill.js';

/**
 * The partition drill's double completion, in one process: a trainer whose worker lost the run's
 * lock (starved of CPU, or cut off) still holds the output folder's lock and finishes the run while
 * the worker that took the run over starts its own trainer, which waits for that lock. Once it has
 * the lock, the result.json the first one wrote is the run done: the taker must not train it again
 * (before, the stand-in resumed from the last checkpoint and trained the last updates a second time).
 */
const root = tempDir('finished-while-waiting');
afterAll(() => removeDir(root));

describe('a run finished by a trainer whose worker lost its lock', () => {
  it('is taken as done by the trainer that waited for the folder lock: trained once, reused', async () => {
    const server = await startEmbeddedRedis({ dir: join(root, 'redis') });
    const conn = queueConnection(server, 'finished-while-waiting');
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(artifacts, 'fww', [{ updates: 60, checkpointEvery: 10, knobs: { step_s: 0.05 } }]);
    const run = audit.runs[0]!;
    const out = join(dirname(run.manifestPath), 'output');
    const tuning = fastTuning();
    const pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: STAND_IN_DIR, module: 'stand_in_trainer' }),
      slots: [{ gpu: null, threads: 1 }],
      tuning,
      host: 'taker',
    });
    const queue = new Queue(RUNS_QUEUE, { connection: conn.options, prefix: conn.prefix });
    try {
      // The old owner's trainer: holds output/.lock and trains to the end (60 x 0.05 s).
      const orphan = spawn(
        trainerPython(),
        ['-m', 'stand_in_trainer', 'run', '--manifest', run.manifestPath, '--out', out, '--resume'],
        { env: { ...process.env, PYTHONPATH: STAND_IN_DIR }, stdio: ['ignore', 'pipe', 'ignore'] },
      );
      const orphanExit = new Promise<number | null>((done) => orphan.once('exit', (code) => done(code)));
      const lines = createInterface({ input: orphan.stdout! });
      await new Promise<void>((started) => lines.on('line', (l) => l.includes('"started"') && started()));
      // The run reaches the queue while it trains: the taker fetches it before result.json exists.
      await submitAudit(conn, artifacts, audit, tuning);
      const status = await waitFor(
        'the audit to finish',
        async () => {
          const [s] = await collectStatus(conn, audit.auditId);
          return s?.state === 'finished' ? s : undefined;
        },
        60_000,
        100,
      );
      expect(await orphanExit).toBe(0);
      expect(status.runs.map((r) => r.state)).toEqual(['completed']);
      const trained = readFileSync(join(out, '.trained'), 'utf8').trim().split('\n');
      expect(trained.filter((l) => l.endsWith(' done'))).toHaveLength(1);
      expect(trainedTwice(join(out, '.trained'))).toBe(false);
      const log = readFileSync(join(out, 'trainer.stderr.log'), 'utf8');
      // The taker's trainer ran (the race went the drill's way) and found the result under the lock.
      expect(log).toContain('attempt 1 of');
      expect(log).toContain("already holds this manifest's result");
      const job = await queue.getJob(run.runId);
      expect(job?.returnvalue).toMatchObject({ run_id: run.runId, reused: true, host: 'taker' });
      expect(existsSync(join(out, 'failure.json'))).toBe(false);
    } finally {
      await queue.close();
      await pool.shutdown();
      await server.stop();
    }
  }, 120_000);
});

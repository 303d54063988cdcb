// tier: slow (redis-server)
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cancelAudit, collectStatus, queueConnection, startEmbeddedRedis, submitAudit } from '../../src/queue/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { localRunner } from '../../src/runner/index.js';
import { fastTuning, removeDir, STAND_IN_DIR, tempDir, waitFor, writeFixtureAudit } from './helpers/fixtures.js';

/**
 * A cancel that lands while the worker's event loop is blocked past the job lock (a loaded
 * machine): the worker then sees the lost lease and the cancel together. Whichever it acts on
 * first, the run must end cancelled (not failed, not trained on), and the audit must finish.
 */
const root = tempDir('stall-cancel');
afterAll(() => removeDir(root));
process.env.CANARY_TRAINER_LOCK_WAIT_S = '4';

describe('a cancel during an event-loop stall longer than the lock', () => {
  it('ends the running run cancelled, not failed', async () => {
    const server = await startEmbeddedRedis({ dir: join(root, 'redis') });
    const conn = queueConnection(server, 'stall-cancel');
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(artifacts, 'stall', [
      { updates: 2_000, checkpointEvery: 10, knobs: { step_s: 0.02 } },
    ]);
    const tuning = fastTuning({ lockMs: 2_000, stalledMs: 1_000, stopGraceMs: 10_000 });
    await submitAudit(conn, artifacts, audit, tuning);
    const runner = localRunner({ trainerPath: STAND_IN_DIR, module: 'stand_in_trainer' });
    const pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner,
      slots: [{ gpu: null, threads: 1 }],
      tuning,
      host: 'stall',
    });
    try {
      await waitFor(
        'the run to train',
        async () => {
          const [s] = await collectStatus(conn, audit.auditId);
          return s?.runs.some((r) => r.state === 'active' && (r.progress?.update ?? 0) >= 20);
        },
        60_000,
        100,
      );
      const until = Date.now() + 5_000;
      while (Date.now() < until) {
        // Busy: no lock renewal, no cancel message handled, while the trainer trains on.
      }
      await cancelAudit(conn, audit.auditId, artifacts);
      const status = await waitFor(
        'the audit to finish',
        async () => {
          const [s] = await collectStatus(conn, audit.auditId);
          return s?.state === 'cancelled' || s?.state === 'finished' ? s : undefined;
        },
        60_000,
        250,
      );
      expect(
        status.runs.map((r) => [r.state, r.failure]),
        JSON.stringify(status.runs),
      ).toEqual([['cancelled', expect.anything()]]);
      expect(status.counts).toEqual({ cancelled: 1 });
    } finally {
      await pool.shutdown();
      await server.stop();
    }
  });
});

// tier: slow (redis-server, the stand-in trainer)
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmdirSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStatus, submitAudit, type EmbeddedRedis } from '../../src/queue/index.js';
import { WorkerPool } from '../../src/worker/index.js';
import { localRunner } from '../../src/runner/index.js';
import { fastTuning, removeDir, standInEnv, tempDir, waitFor, writeFixtureAudit } from './helpers/fixtures.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

/**
 * A worker whose artifact store is full: the run fails for good as disk_full, with the path, after
 * one attempt (no retries on the same full disk), and the audit still finishes.
 */
const root = tempDir('full-disk');
let redis: EmbeddedRedis;
let pool: WorkerPool | undefined;
let disk: string | null = null;

function mountTmpfs(size: string): string | null {
  const dir = mkdtempSync(join(root, 'mnt-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return dir;
  } catch {
    rmdirSync(dir);
    return null;
  }
}

/** Write zeros until the file system says ENOSPC. */
function fill(dir: string): void {
  const fd = openSync(join(dir, 'filler'), 'w');
  const block = Buffer.alloc(4096);
  try {
    for (;;) writeSync(fd, block);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
}

beforeAll(async () => {
  redis = await startTestRedis(root);
  disk = mountTmpfs('2m');
});
afterAll(async () => {
  await pool?.shutdown();
  await redis?.stop();
  if (disk) execFileSync('umount', [disk]);
  removeDir(root);
});

describe('a full artifact store', () => {
  it('fails the run once as disk_full naming the path, and the audit finishes', async (ctx) => {
    if (disk === null) ctx.skip(); // needs root for the tmpfs
    const artifacts = disk as string;
    const conn = isolatedConnection(redis);
    const audit = writeFixtureAudit(artifacts, 'full', [{ updates: 3, cell: 'a' }]);
    fill(artifacts);
    const tuning = fastTuning({ attempts: 3, lockMs: 10_000 });
    await submitAudit(conn, artifacts, audit, tuning);
    pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: standInEnv().CANARY_AUDIT_TRAINER_PATH, module: 'stand_in_trainer' }),
      slots: [{ gpu: null, threads: 1 }],
      tuning,
    });
    const status = await waitFor(
      'the audit to finish',
      async () => {
        const [s] = await collectStatus(conn, audit.auditId);
        return s?.state === 'finished' ? s : undefined;
      },
      60_000,
    );
    const run = status.runs[0]!;
    expect(run.state).toBe('failed');
    expect(run.attempts_made).toBe(1);
    expect(run.failure).toMatch(
      /^disk_full: cannot write \S+\/runs\/run-[0-9a-f]{16}\/output(\/trainer\.stderr\.log)?: no space left on the device \(ENOSPC\); free space there or choose another folder$/,
    );
  });
});

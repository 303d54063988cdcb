// tier: slow (redis-server, the trainer)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { CLI, FAST_ENV } from '../queue/helpers/cli.js';
import { removeDir, standInEnv, tempDir, waitFor, writeFixtureAudit } from '../queue/helpers/fixtures.js';
import { runMain } from '../queue/helpers/main.js';
import { expectOutput } from '../helpers/output-schema.js';

const root = tempDir('cli-run');
afterAll(() => removeDir(root));
const env = { ...FAST_ENV, ...standInEnv(), REDIS_URL: undefined, CANARY_AUDIT_QUEUE_PREFIX: undefined };

describe('canary-audit run', () => {
  it('runs a whole audit on a private redis-server, lists failed runs, and picks up where it left off', async () => {
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(artifacts, 'local', [
      { updates: 5, cell: 'a' },
      { updates: 4, cell: 'b' },
      { updates: 3, knobs: { fail_exit: 2 }, cell: 'bad' },
    ]);
    const first = await runMain(['run', audit.auditDir, '--cpu', '2', '--no-report', '--json'], env);
    expect(first.code, first.stderr).toBe(1); // one run failed
    const out = expectOutput<{
      audit_id: string;
      counts: Record<string, number>;
      failed: { cell_id: string; reason: string }[];
      interrupted: boolean;
      report: unknown;
    }>('run-output', first.stdout);
    expect(out).toMatchObject({
      audit_id: audit.auditId,
      interrupted: false,
      counts: { completed: 2, failed: 1 },
      report: null,
    });
    expect(out.failed).toEqual([
      {
        run_id: audit.runs[2]!.runId,
        cell_id: 'bad',
        state: 'failed',
        reason: 'bad_manifest: planned failure (exit 2)',
      },
    ]);

    // The private Redis is stopped, its append-only file kept in the audit folder.
    const redisDir = join(audit.auditDir, 'redis');
    expect(existsSync(join(redisDir, 'appendonlydir'))).toBe(true);
    expect(existsSync(join(redisDir, 'redis.pid'))).toBe(false);

    // Again: the queue comes back from the append-only file, nothing runs twice.
    const again = await runMain(['run', audit.auditDir, '--cpu', '1', '--no-report'], env);
    expect(again.code).toBe(1);
    expect(again.stdout).toMatch(
      new RegExp(
        `^${audit.auditId}: 2/3 runs completed, 1 failed or cancelled\\n  ${audit.runs[2]!.runId} bad failed: bad_manifest`,
      ),
    );
  });

  it('says how to install redis-server when there is none and no REDIS_URL', async () => {
    const audit = writeFixtureAudit(join(root, 'a2'), 'noredis', [{ updates: 1 }]);
    const result = await runMain(['run', audit.auditDir, '--cpu', '1', '--no-report'], {
      ...env,
      PATH: join(root, 'empty-bin'),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^canary-audit: redis-server not found on PATH; install it with `apt-get install redis-server` \(or run `bash .ci\/setup`\)/,
    );
  });
});

describe('canary-audit run, Ctrl-C', () => {
  it('SIGINT to the process group (a terminal Ctrl-C) stops run within stop grace + 15 s, Redis included', async () => {
    const audit = writeFixtureAudit(join(root, 'ctrl-c'), 'ctrlc', [
      { updates: 4000, checkpointEvery: 5, knobs: { step_s: 0.02 } },
    ]);
    const child = execa(process.execPath, [...CLI, 'run', audit.auditDir, '--cpu', '1', '--no-report', '--json'], {
      cwd: PACKAGE_ROOT,
      env: { ...FAST_ENV, ...standInEnv(), CANARY_AUDIT_STOP_GRACE_MS: '10000' },
      extendEnv: true,
      detached: true, // its own process group, as a shell gives a foreground job
      reject: false,
      all: true,
    });
    const state = join(audit.runs[0]!.manifestPath, '..', 'output', 'checkpoints', 'state.json');
    await waitFor('the trainer to checkpoint', () => existsSync(state), 60_000);
    const redisPid = Number(readFileSync(join(audit.auditDir, 'redis', 'redis.pid'), 'utf8'));
    const sent = Date.now();
    process.kill(-child.pid!, 'SIGINT');
    const bound = 10_000 + 15_000;
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), bound + 10_000);
    const result = await child;
    clearTimeout(timer);
    const took = Date.now() - sent;
    expect(result.signal, result.all).toBeUndefined();
    expect(took).toBeLessThan(bound);
    expect(JSON.parse(result.stdout)).toMatchObject({ interrupted: true });
    expect(() => process.kill(redisPid, 0)).toThrow(); // the private Redis was stopped, not left behind
  });
});

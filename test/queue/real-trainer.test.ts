// tier: slow (redis-server, the trainer)
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Result } from '../../src/contracts/result.js';
import { collectStatus, type EmbeddedRedis } from '../../src/queue/index.js';
import { detectGpus } from '../../src/worker/index.js';
import { validate } from '../../src/schemas/index.js';
import { hasTorch } from '../helpers/torch.js';
import { FAST_ENV, startWorker, type WorkerProcess } from './helpers/cli.js';
import { removeDir, tempDir, waitFor } from './helpers/fixtures.js';
import { runMain } from './helpers/main.js';
import { isolatedConnection, startTestRedis } from './helpers/redis.js';

/**
 * The queue with the real trainer (trainer-py, tiny backend on CPU): `run` end to end with its
 * report, then submit + worker with the worker killed -9 mid-run, whose scores must equal the
 * uninterrupted run's bit for bit.
 */
const TINY_GRID = fileURLToPath(new URL('./fixtures/tiny-grid.yaml', import.meta.url));

const root = tempDir('real');
let redis: EmbeddedRedis;
const workers: WorkerProcess[] = [];
// No stand-in: the local runner starts trainer-py.
const env = {
  ...FAST_ENV,
  CANARY_AUDIT_TRAINER_PATH: undefined,
  CANARY_AUDIT_TRAINER_MODULE: undefined,
  REDIS_URL: undefined,
};

beforeAll(async () => {
  redis = await startTestRedis(root);
});
afterAll(async () => {
  for (const w of workers) w.process.kill('SIGKILL');
  await redis?.stop();
  removeDir(root);
});

function scoreFiles(outDir: string): Record<string, Buffer> {
  const dir = join(outDir, 'scores', 'final');
  return Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((f) => [f, readFileSync(join(dir, f))]),
  );
}

describe.skipIf(!hasTorch)('queue with the real trainer (tiny backend)', () => {
  let reference: { outDir: string; runId: string } | undefined;

  it('run GRID: private Redis, a worker, a schema-valid result and the report', async () => {
    const artifacts = join(root, 'reference');
    const result = await runMain(['run', TINY_GRID, '--cpu', '1', '--artifacts', artifacts, '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { audit_dir: string; counts: Record<string, number>; report: string[] };
    expect(out.counts).toEqual({ completed: 1 });
    expect(out.report.some((f) => f.endsWith('report.md'))).toBe(true);
    const runId = readdirSync(join(out.audit_dir, 'runs'))[0]!;
    const outDir = join(out.audit_dir, 'runs', runId, 'output');
    const json = JSON.parse(readFileSync(join(outDir, 'result.json'), 'utf8')) as Result;
    expect(validate('result', json)).toEqual([]);
    expect(json.run_id).toBe(runId);
    reference = { outDir, runId };
  }, 300_000);

  it('kill -9 of the worker mid-run: a second worker resumes and the scores equal the uninterrupted run', async () => {
    expect(reference).toBeDefined();
    const conn = isolatedConnection(redis);
    const artifacts = join(root, 'killed');
    const submitEnv = { ...env, CANARY_AUDIT_QUEUE_PREFIX: conn.prefix };
    const submitted = await runMain(
      ['submit', TINY_GRID, '--redis', redis.url, '--artifacts', artifacts, '--json'],
      submitEnv,
    );
    expect(submitted.code, submitted.stderr).toBe(0);
    const { audit_id: auditId, audit_dir: auditDir } = JSON.parse(submitted.stdout) as {
      audit_id: string;
      audit_dir: string;
    };

    const args = ['--cpu', '1', '--redis', redis.url, '--artifacts', artifacts];
    const workerEnv = {
      CANARY_AUDIT_QUEUE_PREFIX: conn.prefix,
      CANARY_AUDIT_TRAINER_PATH: '',
      CANARY_AUDIT_TRAINER_MODULE: '',
    };
    const first = await startWorker(args, workerEnv);
    workers.push(first);
    // Killed at the first checkpoint seen, with most of the run still ahead: the orphaned trainer
    // notices within its parent-watch interval (0.5 s) and must still be training then, or it
    // would finish on its own and there would be nothing to resume.
    const progress = await waitFor(
      'a checkpoint before the end',
      async () => {
        const [s] = await collectStatus(conn, auditId);
        const p = s?.runs[0]?.progress;
        return p && p.last_checkpoint !== null && p.last_checkpoint >= 4 ? p : undefined;
      },
      120_000,
      50,
    );
    expect(progress.update).toBeLessThan(24);
    first.process.kill('SIGKILL');
    await first.process;

    const second = await startWorker(args, workerEnv);
    workers.push(second);
    const status = await waitFor(
      'the audit to finish',
      async () => {
        const [s] = await collectStatus(conn, auditId);
        return s?.state === 'finished' ? s : undefined;
      },
      180_000,
      250,
    );
    second.process.kill('SIGTERM');
    await second.process;

    expect(status.runs[0]).toMatchObject({ run_id: reference!.runId, state: 'completed' });
    const outDir = join(auditDir, 'runs', reference!.runId, 'output');
    const result = JSON.parse(readFileSync(join(outDir, 'result.json'), 'utf8')) as Result;
    expect(result.training.resumed_from).toBeGreaterThanOrEqual(4);
    expect(scoreFiles(outDir)).toEqual(scoreFiles(reference!.outDir));
  }, 400_000);

  // Runs only where nvidia-smi lists a GPU (the GPU machine); skipped elsewhere.
  it.skipIf(detectGpus().length === 0)(
    'a GPU worker pins its trainer to its GPU (CUDA_VISIBLE_DEVICES)',
    async () => {
      const grid = join(root, 'tiny-cuda.yaml');
      writeFileSync(grid, readFileSync(TINY_GRID, 'utf8').replace('device: cpu', 'device: cuda'));
      const gpu = detectGpus()[0]!;
      const result = await runMain(
        ['run', grid, '--gpus', gpu, '--artifacts', join(root, 'gpu'), '--no-report', '--json'],
        env,
      );
      expect(result.code, result.stderr).toBe(0);
      const out = JSON.parse(result.stdout) as { audit_dir: string; counts: Record<string, number> };
      expect(out.counts).toEqual({ completed: 1 });
      const runId = readdirSync(join(out.audit_dir, 'runs'))[0]!;
      const json = JSON.parse(
        readFileSync(join(out.audit_dir, 'runs', runId, 'output', 'result.json'), 'utf8'),
      ) as Result;
      // The only visible GPU is the worker's: the trainer sees it as cuda:0.
      expect(json.backend.device).toMatch(/^cuda(:0)?$/);
    },
    300_000,
  );
});

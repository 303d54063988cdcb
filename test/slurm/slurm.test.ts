import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Result } from '../../src/contracts/result.js';
import { collectStatus, openRedis, queueConnection, readFleet, type EmbeddedRedis, type QueueConnection } from '../../src/queue/index.js';
import { trainerPython } from '../../src/runner/index.js';
import { TRAINER_DIR } from '../../src/paths.js';
import { hasTorch } from '../helpers/torch.js';
import { expectOutput } from '../helpers/output-schema.js';
import { runCli } from '../queue/helpers/cli.js';
import { removeDir, tempDir, waitFor } from '../queue/helpers/fixtures.js';
import { runMain } from '../queue/helpers/main.js';
import { startTestRedis } from '../queue/helpers/redis.js';
import { showJob, startTestCluster, type TestCluster } from './helpers/cluster.js';

/**
 * `canary-audit slurm` on a real single-node Slurm (slurmctld + slurmd + munge on this host, started
 * here; skipped with the reason where they cannot start): CPU workers in a job array finish a
 * tiny-backend audit through the real trainer; `scancel --signal=USR1` and a time limit
 * (`--signal=B:USR1@S`) each make the worker checkpoint, hand its run back without spending an
 * attempt and exit 75, the job requeue itself, and the requeued worker finish the run with the
 * scores of an uninterrupted run, bit for bit.
 */
const TINY_GRID = fileURLToPath(new URL('../queue/fixtures/tiny-grid.yaml', import.meta.url));
const root = tempDir('slurm');
let cluster: TestCluster | null = null;
let skipReason = '';
let redis: EmbeddedRedis;

beforeAll(async () => {
  if (!hasTorch) {
    skipReason = 'the trainer venv has no torch';
    return;
  }
  const started = await startTestCluster(join(root, 'slurm'));
  if ('skip' in started) skipReason = started.skip;
  else cluster = started.cluster;
  if (cluster) redis = await startTestRedis(root);
}, 120_000);
afterAll(async () => {
  await cluster?.stop();
  await redis?.stop();
  removeDir(root);
}, 120_000);

/** What every process of the drill sees: the test cluster, this test's queue prefix, the real trainer. */
function drillEnv(conn: QueueConnection): Record<string, string> {
  return {
    ...(cluster as TestCluster).env,
    CANARY_AUDIT_QUEUE_PREFIX: conn.prefix,
    CANARY_AUDIT_TRAINER_PATH: '',
    CANARY_AUDIT_TRAINER_MODULE: '',
    // Longer locks than the queue tests: the trainers load this shared machine's two cores.
    CANARY_AUDIT_LOCK_MS: '10000',
    CANARY_AUDIT_STALLED_MS: '5000',
  };
}

async function submitGrid(text: string, name: string, conn: QueueConnection, artifacts: string): Promise<{ auditId: string; auditDir: string }> {
  const grid = join(root, `${name}.yaml`);
  writeFileSync(grid, text);
  const submitted = await runMain(['submit', grid, '--redis', redis.url, '--artifacts', artifacts, '--json'], { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix, REDIS_URL: undefined });
  expect(submitted.code, submitted.stderr).toBe(0);
  const out = JSON.parse(submitted.stdout) as { audit_id: string; audit_dir: string };
  return { auditId: out.audit_id, auditDir: out.audit_dir };
}

async function slurmSubmit(args: string[], conn: QueueConnection, artifacts: string): Promise<string> {
  const result = await runCli(
    ['slurm', '--submit', '--redis', redis.url, '--artifacts', artifacts, '--cpus-per-worker', '1', '--stop-grace-s', '20', '--hf-home', join(root, 'hf'), ...args],
    drillEnv(conn),
  );
  expect(result.exitCode, result.all).toBe(0);
  const id = /submitted job (\d+)/.exec(result.stdout)?.[1];
  expect(id, result.all).toBeDefined();
  return id as string;
}

function scoreFiles(outDir: string): Record<string, Buffer> {
  const dir = join(outDir, 'scores', 'final');
  return Object.fromEntries(readdirSync(dir).sort().map((f) => [f, readFileSync(join(dir, f))]));
}

/** The run trained uninterrupted by the trainer itself, with the threads a one-slot CPU worker gives it. */
async function reference(manifest: string, outDir: string): Promise<Record<string, Buffer>> {
  await execa(trainerPython(), ['-m', 'canary_trainer', 'run', '--manifest', manifest, '--out', outDir], {
    env: { PYTHONPATH: TRAINER_DIR, CANARY_TRAINER_THREADS: String(Math.max(1, Math.floor(availableParallelism() / 1))), CANARY_TRAINER_PARENT_WATCH: '0' },
    stdio: 'ignore',
  });
  return scoreFiles(outDir);
}

async function finished(conn: QueueConnection, auditId: string, timeoutMs: number) {
  return waitFor('the audit to finish', async () => {
    const [s] = await collectStatus(conn, auditId);
    return s?.state === 'finished' ? s : undefined;
  }, timeoutMs, 500);
}

const restarts = (id: string) => Number(showJob(id, (cluster as TestCluster).env).Restarts ?? 0);

/** Workers do not stop when the queue is empty: the drill cancels its job and waits until it is gone. */
async function cancelJob(id: string): Promise<void> {
  const env = { ...process.env, ...(cluster as TestCluster).env };
  await execa('scancel', [id], { env, reject: false });
  await waitFor(`job ${id} to end`, async () => (await execa('squeue', ['-h', '-j', id], { env, reject: false })).stdout.trim() === '', 120_000, 1_000);
}

describe('Slurm worker pools (a real single-node Slurm)', () => {
  it('slurm --submit: a job array of CPU workers (job id and node in status) finishes an audit; scancel --signal=USR1 hands both runs back and the requeued workers finish them unchanged', async (ctx) => {
    if (!cluster) ctx.skip(skipReason);
    const conn = queueConnection(redis, `slurm-usr1-${Date.now()}`);
    const artifacts = join(root, 'usr1');
    const { auditId, auditDir } = await submitGrid(readFileSync(TINY_GRID, 'utf8').replace('dose: [2]', 'dose: [1, 2]'), 'usr1', conn, artifacts);
    const jobId = await slurmSubmit(['--workers', '2', '--max-running', '2', '--time', '30'], conn, artifacts);
    ctx.onTestFinished(() => cancelJob(jobId), 150_000);

    // Both runs training, each past a checkpoint, with most of the run ahead.
    await waitFor('both runs past a checkpoint', async () => {
      const [s] = await collectStatus(conn, auditId);
      const ps = s?.runs.map((r) => r.progress) ?? [];
      return ps.length === 2 && ps.every((p) => p && p.phase === 'training' && p.last_checkpoint !== null && p.last_checkpoint >= 4) ? ps : undefined;
    }, 300_000, 250);

    // Each worker says which Slurm job and node it runs in: the heartbeat, status --workers and its JSON.
    const client = openRedis(conn);
    try {
      const fleet = (await readFleet(client, conn.prefix)).filter((w) => w.state !== 'lost');
      expect(fleet.map((w) => [w.slurm?.array_job_id, w.slurm?.node]).sort()).toEqual([[jobId, cluster!.node], [jobId, cluster!.node]]);
      expect(fleet.map((w) => w.slurm?.array_task_id).sort()).toEqual(['0', '1']);
    } finally {
      client.disconnect();
    }
    const text = await runMain(['status', '--workers', '--redis', redis.url], { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix });
    expect(text.stdout).toContain(`slurm ${jobId}_0 (job `);
    expect(text.stdout).toContain(`on ${cluster!.node}`);
    const json = await runMain(['status', '--workers', '--json', '--redis', redis.url], { CANARY_AUDIT_QUEUE_PREFIX: conn.prefix });
    expectOutput('fleet-output', json.stdout);

    await execa('scancel', ['--signal=USR1', jobId], { env: { ...process.env, ...cluster!.env } });
    // Both array tasks requeue themselves after their workers handed the runs back.
    await waitFor('both tasks requeued', () => restarts(`${jobId}_0`) >= 1 && restarts(`${jobId}_1`) >= 1, 120_000, 1_000);
    const status = await finished(conn, auditId, 600_000);
    expect(status.counts).toEqual({ completed: 2 });
    // Handed back, not failed: the only attempt counted is the one that finished.
    expect(status.runs.map((r) => r.attempts_made)).toEqual([1, 1]);
    const logs = readdirSync(join(artifacts, 'slurm', 'logs')).map((f) => readFileSync(join(artifacts, 'slurm', 'logs', f), 'utf8')).join('\n');
    expect(logs).toMatch(/handed its runs back .* requeueing job/);

    const refs = await Promise.all(status.runs.map((r, i) => reference(join(auditDir, 'runs', r.run_id, 'manifest.json'), join(root, `usr1-ref-${i}`))));
    status.runs.forEach((r, i) => {
      const outDir = join(auditDir, 'runs', r.run_id, 'output');
      const result = JSON.parse(readFileSync(join(outDir, 'result.json'), 'utf8')) as Result;
      expect(result.training.resumed_from).toBeGreaterThanOrEqual(4);
      expect(scoreFiles(outDir)).toEqual(refs[i]);
    });
  }, 1_200_000);

  it('a time limit: SIGUSR1 before it (--signal=B:USR1@S), checkpoint, hand-back, requeue, and the requeued worker finishes the run unchanged', async (ctx) => {
    if (!cluster) ctx.skip(skipReason);
    const conn = queueConnection(redis, `slurm-time-${Date.now()}`);
    const artifacts = join(root, 'time');
    // Long enough that the 2-minute limit's warning (sent 30-60 s after the start) comes mid-training.
    const { auditId, auditDir } = await submitGrid(readFileSync(TINY_GRID, 'utf8').replace('updates: 48 ', 'updates: 240'), 'time', conn, artifacts);
    const jobId = await slurmSubmit(['--workers', '1', '--time', '2', '--signal-s', '60'], conn, artifacts);
    ctx.onTestFinished(() => cancelJob(jobId), 150_000);
    const task = `${jobId}_0`;
    await waitFor('the job to requeue itself before its time limit', () => restarts(task) >= 1, 240_000, 1_000);
    const [mid] = await collectStatus(conn, auditId);
    expect(mid?.runs[0]?.attempts_made).toBe(0);
    // The requeued job may now finish the run.
    await execa('scontrol', ['update', `JobId=${task}`, 'TimeLimit=30'], { env: { ...process.env, ...cluster!.env } });
    const status = await finished(conn, auditId, 600_000);
    expect(status.counts).toEqual({ completed: 1 });
    expect(status.runs[0]?.attempts_made).toBe(1);
    const run = status.runs[0]!;
    const outDir = join(auditDir, 'runs', run.run_id, 'output');
    const result = JSON.parse(readFileSync(join(outDir, 'result.json'), 'utf8')) as Result;
    expect(result.training.resumed_from).toBeGreaterThanOrEqual(4);
    expect(scoreFiles(outDir)).toEqual(await reference(join(auditDir, 'runs', run.run_id, 'manifest.json'), join(root, 'time-ref')));
  }, 1_200_000);

  it('a partition that does not exist: one line from sbatch\'s answer, exit 2', async (ctx) => {
    if (!cluster) ctx.skip(skipReason);
    const conn = queueConnection(redis, 'slurm-bad');
    const result = await runCli(['slurm', '--submit', '--partition', 'nope', '--redis', redis.url, '--artifacts', join(root, 'bad')], drillEnv(conn));
    expect(result.exitCode).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/sbatch refused the job: invalid partition specified: nope \(Batch job submission failed: Invalid partition name specified\); check/);
  }, 120_000);
});

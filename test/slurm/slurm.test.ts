// tier: slow
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Result } from '../../src/contracts/result.js';
import {
  collectStatus,
  openRedis,
  queueConnection,
  readFleet,
  type EmbeddedRedis,
  type QueueConnection,
} from '../../src/queue/index.js';
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
 * here). A job array of two CPU workers takes the two runs of a tiny-backend audit through the real
 * trainer; once each trainer is past a checkpoint, one task gets `scancel --signal=USR1` and the
 * other a time limit close enough that Slurm's own `--signal=B:USR1@S` fires. Each worker stops its
 * trainer (which checkpoints), hands the run back without spending an attempt and exits 75, the
 * task requeues itself, and the requeued worker finishes the run with the scores of an
 * uninterrupted run, bit for bit.
 *
 * The order is made certain, not raced: each trainer is held (SIGSTOP) once past its checkpoint, and
 * let go (SIGCONT) only when the worker's SIGTERM is pending in it, so a run cannot finish before its
 * hand-back on any machine, however fast or loaded.
 *
 * Skipped, with the reason, where Slurm cannot start here (not installed, not root); with
 * CANARY_REQUIRE_SLURM=1 that is a failure instead, so a machine that must run the drill cannot
 * silently stop running it.
 */
const TINY_GRID = fileURLToPath(new URL('../queue/fixtures/tiny-grid.yaml', import.meta.url));
const root = tempDir('slurm');
const requireSlurm = process.env.CANARY_REQUIRE_SLURM === '1';
let cluster: TestCluster | null = null;
let skipReason = '';
let redis: EmbeddedRedis;

beforeAll(async () => {
  if (!hasTorch) skipReason = 'the trainer venv has no torch';
  else {
    const started = await startTestCluster(join(root, 'slurm'));
    if ('skip' in started) skipReason = started.skip;
    else cluster = started.cluster;
  }
  if (skipReason && requireSlurm) throw new Error(`the Slurm drill must run (CANARY_REQUIRE_SLURM=1): ${skipReason}`);
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

const slurmEnv = () => ({ ...process.env, ...(cluster as TestCluster).env });

async function submitGrid(
  text: string,
  name: string,
  conn: QueueConnection,
  artifacts: string,
): Promise<{ auditId: string; auditDir: string }> {
  const grid = join(root, `${name}.yaml`);
  writeFileSync(grid, text);
  const submitted = await runMain(['submit', grid, '--redis', redis.url, '--artifacts', artifacts, '--json'], {
    CANARY_AUDIT_QUEUE_PREFIX: conn.prefix,
    REDIS_URL: undefined,
  });
  expect(submitted.code, submitted.stderr).toBe(0);
  const out = JSON.parse(submitted.stdout) as { audit_id: string; audit_dir: string };
  return { auditId: out.audit_id, auditDir: out.audit_dir };
}

async function slurmSubmit(args: string[], conn: QueueConnection, artifacts: string): Promise<string> {
  const result = await runCli(
    [
      'slurm',
      '--submit',
      '--redis',
      redis.url,
      '--artifacts',
      artifacts,
      '--cpus-per-worker',
      '1',
      '--stop-grace-s',
      '20',
      '--hf-home',
      join(root, 'hf'),
      ...args,
    ],
    drillEnv(conn),
  );
  expect(result.exitCode, result.all).toBe(0);
  const id = /submitted job (\d+)/.exec(result.stdout)?.[1];
  expect(id, result.all).toBeDefined();
  return id as string;
}

function scoreFiles(outDir: string): Record<string, Buffer> {
  const dir = join(outDir, 'scores', 'final');
  return Object.fromEntries(
    readdirSync(dir)
      .sort()
      .map((f) => [f, readFileSync(join(dir, f))]),
  );
}

/** The pid of the trainer process training `manifest` (found by its command line), or undefined. */
function trainerPid(manifest: string): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      if (argv.includes('canary_trainer') && argv.includes(manifest)) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** One variable of a process's environment. */
function envOf(pid: number, name: string): string | undefined {
  const entry = readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .find((kv) => kv.startsWith(`${name}=`));
  return entry?.slice(name.length + 1);
}

/** The highest update a checkpoint of the run folder's output has been written for (0: none). */
function lastCheckpoint(outDir: string): number {
  try {
    return Math.max(
      0,
      ...readdirSync(join(outDir, 'checkpoints')).map((f) => Number(/^update-(\d+)$/.exec(f)?.[1] ?? 0)),
    );
  } catch {
    return 0;
  }
}

/** Whether SIGTERM is pending in a (stopped) process: the worker has asked it to stop. */
function termPending(pid: number): boolean {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const pending = [...status.matchAll(/^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$/gm)].reduce(
    (acc, m) => acc | BigInt(`0x${m[1]}`),
    0n,
  );
  return (pending & (1n << 14n)) !== 0n;
}

const stateOf = (pid: number) => /^State:\s*(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];

interface Held {
  pid: number;
  /** The array task (ARRAYJOB_TASK) whose worker runs the trainer: the array's own job id names every task. */
  job: string;
  threads: string;
}

/** Wait until the run's trainer is past its first checkpoint and hold it there (SIGSTOP). */
async function holdPastCheckpoint(manifest: string, outDir: string): Promise<Held> {
  const pid = await waitFor(`the trainer of ${manifest} to start`, () => trainerPid(manifest), 180_000, 100);
  await waitFor(`the trainer of ${manifest} past a checkpoint`, () => lastCheckpoint(outDir) >= 4, 180_000, 20);
  process.kill(pid, 'SIGSTOP');
  await waitFor('the trainer to stop', () => stateOf(pid) === 'T', 10_000, 20);
  // Held mid-training: the run has most of its 120 updates ahead.
  expect(lastCheckpoint(outDir)).toBeLessThan(100);
  return {
    pid,
    job: `${envOf(pid, 'SLURM_ARRAY_JOB_ID')}_${envOf(pid, 'SLURM_ARRAY_TASK_ID')}`,
    threads: envOf(pid, 'CANARY_TRAINER_THREADS') as string,
  };
}

/** Let a held trainer go once its worker's SIGTERM is pending in it. */
async function releaseWhenStopped(held: Held): Promise<void> {
  await waitFor(`the worker of job ${held.job} to ask its trainer to stop`, () => termPending(held.pid), 120_000, 100);
  process.kill(held.pid, 'SIGCONT');
}

/** The run trained uninterrupted by the trainer itself, with the threads its worker gave it. */
async function reference(manifest: string, outDir: string, threads: string): Promise<Record<string, Buffer>> {
  await execa(trainerPython(), ['-m', 'canary_trainer', 'run', '--manifest', manifest, '--out', outDir], {
    env: { PYTHONPATH: TRAINER_DIR, CANARY_TRAINER_THREADS: threads, CANARY_TRAINER_PARENT_WATCH: '0' },
    stdio: 'ignore',
  });
  return scoreFiles(outDir);
}

const restarts = (id: string) => Number(showJob(id, (cluster as TestCluster).env).Restarts ?? 0);

/** `RunTime=[D-]HH:MM:SS` of a job, in seconds. */
function runTimeS(id: string): number {
  const m = /^(?:(\d+)-)?(\d+):(\d+):(\d+)$/.exec(showJob(id, (cluster as TestCluster).env).RunTime ?? '');
  if (!m) throw new Error(`no RunTime for job ${id}`);
  return ((Number(m[1] ?? 0) * 24 + Number(m[2])) * 60 + Number(m[3])) * 60 + Number(m[4]);
}

/** Workers do not stop when the queue is empty: the drill cancels its job and waits until it is gone. */
async function cancelJob(id: string): Promise<void> {
  await execa('scancel', [id], { env: slurmEnv(), reject: false });
  await waitFor(
    `job ${id} to end`,
    async () => (await execa('squeue', ['-h', '-j', id], { env: slurmEnv(), reject: false })).stdout.trim() === '',
    120_000,
    500,
  );
}

describe('Slurm worker pools (a real single-node Slurm)', () => {
  it('slurm --submit: a job array of two CPU workers (job id and node in status); scancel --signal=USR1 on one and a time limit on the other hand the runs back, and the requeued workers finish them unchanged', async (ctx) => {
    if (!cluster) ctx.skip(skipReason);
    const conn = queueConnection(redis, `slurm-${Date.now()}`);
    const artifacts = join(root, 'drill');
    // Two runs of 120 updates (a few seconds each on one core), checkpointed every 4.
    const grid = readFileSync(TINY_GRID, 'utf8')
      .replace('dose: [2]', 'dose: [1, 2]')
      .replace('updates: 48 ', 'updates: 120');
    const { auditId, auditDir } = await submitGrid(grid, 'drill', conn, artifacts);
    // --signal-s 120: the time limit set below (1-2 minutes ahead) is within the warning at once.
    const jobId = await slurmSubmit(
      ['--workers', '2', '--max-running', '2', '--time', '30', '--signal-s', '120'],
      conn,
      artifacts,
    );
    ctx.onTestFinished(() => cancelJob(jobId), 150_000);

    const [queued] = await collectStatus(conn, auditId);
    const runs = (queued?.runs ?? []).map((r) => ({
      id: r.run_id,
      manifest: join(auditDir, 'runs', r.run_id, 'manifest.json'),
      out: join(auditDir, 'runs', r.run_id, 'output'),
    }));
    expect(runs).toHaveLength(2);
    const held = await Promise.all(runs.map((r) => holdPastCheckpoint(r.manifest, r.out)));
    expect(new Set(held.map((h) => h.job)).size).toBe(2);

    // Each worker says which Slurm job and node it runs in: the heartbeat, status --workers and its JSON.
    const client = openRedis(conn);
    try {
      const fleet = (await readFleet(client, conn.prefix)).filter((w) => w.state !== 'lost');
      expect(fleet.map((w) => [w.slurm?.array_job_id, w.slurm?.node]).sort()).toEqual([
        [jobId, cluster!.node],
        [jobId, cluster!.node],
      ]);
      expect(fleet.map((w) => w.slurm?.array_task_id).sort()).toEqual(['0', '1']);
    } finally {
      client.disconnect();
    }
    const text = await runMain(['status', '--workers', '--redis', redis.url], {
      CANARY_AUDIT_QUEUE_PREFIX: conn.prefix,
    });
    expect(text.stdout).toContain(`slurm ${jobId}_0 (job `);
    expect(text.stdout).toContain(`on ${cluster!.node}`);
    const json = await runMain(['status', '--workers', '--json', '--redis', redis.url], {
      CANARY_AUDIT_QUEUE_PREFIX: conn.prefix,
    });
    expectOutput('fleet-output', json.stdout);

    // The first run's task: SIGUSR1 from scancel. The second's: a time limit 1-2 minutes ahead,
    // inside --signal=B:USR1@120, so Slurm's controller sends the warning itself.
    const [usr1, limit] = held as [Held, Held];
    await execa('scancel', ['--signal=USR1', usr1.job], { env: slurmEnv() });
    await execa('scontrol', ['update', `JobId=${limit.job}`, `TimeLimit=${Math.floor(runTimeS(limit.job) / 60) + 2}`], {
      env: slurmEnv(),
    });
    await releaseWhenStopped(usr1);
    // The uninterrupted runs, trained meanwhile (Slurm's controller checks time limits every 30 s).
    const refs = Promise.all(runs.map((r, i) => reference(r.manifest, join(root, `ref-${i}`), held[i]!.threads)));
    await releaseWhenStopped(limit);
    // The warning came; the requeued task may take its time to finish the run.
    await execa('scontrol', ['update', `JobId=${limit.job}`, 'TimeLimit=30'], { env: slurmEnv() });

    await waitFor('both tasks requeued', () => restarts(usr1.job) >= 1 && restarts(limit.job) >= 1, 120_000, 250);
    const [mid] = await collectStatus(conn, auditId);
    expect(mid?.runs.map((r) => r.attempts_made)).toEqual([0, 0]);

    const status = await waitFor(
      'the audit to finish',
      async () => {
        const [s] = await collectStatus(conn, auditId);
        return s?.state === 'finished' ? s : undefined;
      },
      300_000,
      250,
    );
    expect(status.counts).toEqual({ completed: 2 });
    const uninterrupted = await refs;
    // Handed back, not failed: the only attempt counted is the one that finished.
    expect(status.runs.map((r) => r.attempts_made)).toEqual([1, 1]);
    const logs = readdirSync(join(artifacts, 'slurm', 'logs'))
      .map((f) => readFileSync(join(artifacts, 'slurm', 'logs', f), 'utf8'))
      .join('\n');
    expect(logs.match(/handed its runs back .* requeueing job/g)).toHaveLength(2);
    runs.forEach((r, i) => {
      expect(status.runs.find((s) => s.run_id === r.id)).toBeDefined();
      const result = JSON.parse(readFileSync(join(r.out, 'result.json'), 'utf8')) as Result;
      expect(result.training.resumed_from).toBeGreaterThanOrEqual(4);
      expect(scoreFiles(r.out)).toEqual(uninterrupted[i]);
    });
  }, 600_000);

  it("a partition that does not exist: one line from sbatch's answer, exit 2", async (ctx) => {
    if (!cluster) ctx.skip(skipReason);
    const conn = queueConnection(redis, 'slurm-bad');
    const result = await runCli(
      ['slurm', '--submit', '--partition', 'nope', '--redis', redis.url, '--artifacts', join(root, 'bad')],
      drillEnv(conn),
    );
    expect(result.exitCode).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /sbatch refused the job: invalid partition specified: nope \(Batch job submission failed: Invalid partition name specified\); check/,
    );
  }, 120_000);
});

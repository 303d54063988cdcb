/**
 * Queue overhead per run, as a ratio to a no-op trainer process's own run time.
 *
 *   npx tsx bench/queue-overhead.ts [--runs 1000] [--slots 2]
 *
 * A 1,000-run audit is queued as one BullMQ flow on a private redis-server and drained by
 * in-process workers whose trainer is a no-op process (the stand-in trainer with `noop`: it starts
 * Python, reads the manifest, prints `started` and `done`, writes result.json). The baseline is that
 * process's own run time, measured by the worker around each run (spawn to exit), so every job is
 * compared with its own process under the same load; the no-op process is also timed alone, two at
 * a time, before and after the drain, for reference. Printed, in ms and as a multiple of the no-op
 * run time:
 *   enqueue -> start     a run's creation (client-side, before the flow is written) to its start
 *                        on an idle worker: includes writing the whole flow in one transaction
 *   finish -> next start the gap a worker leaves between two runs (BullMQ fetches the next run in
 *                        the same Redis call that completes the last one)
 *   in-job overhead      start -> finish of a job minus its trainer process's run time (manifest
 *                        checks, job logs, progress writes, process start through execa)
 *   per run, all in      drain time x slots / runs, minus the median no-op run time
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';

// Before the queue modules load (the logger reads it once): worker chatter off.
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
const { STAND_IN_DIR, removeDir, tempDir, waitFor, writeFixtureAudit } = await import(
  '../test/queue/helpers/fixtures.js'
);
const { openQueues, queueConnection, resolveTuning, startEmbeddedRedis, submitAudit } = await import(
  '../src/queue/index.js'
);
const { WorkerPool } = await import('../src/worker/index.js');
const { localRunner, trainerPython } = await import('../src/runner/index.js');

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '1000' }, slots: { type: 'string', default: '2' } },
});
const RUNS = Number(values.runs);
const SLOTS = Number(values.slots);
const BASELINE_SAMPLES = 20;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
function p95(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(0.95 * s.length))]!;
}

/** n no-op runs on each of `parallel` lanes at once: the same load the worker slots put on the cores. */
async function timeNoop(manifest: string, outRoot: string, n: number, parallel: number): Promise<number[]> {
  const lanes = await Promise.all(
    Array.from({ length: parallel }, (_, lane) => timeLane(manifest, join(outRoot, `lane${lane}`), n)),
  );
  return lanes.flat();
}

async function timeLane(manifest: string, outRoot: string, n: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const t0 = performance.now();
    // Spawned the way the worker spawns it (execa, same interpreter and arguments).
    await execa(
      trainerPython(),
      [
        '-m',
        'stand_in_trainer',
        'run',
        '--manifest',
        manifest,
        '--out',
        join(outRoot, `noop-${i}-${Date.now()}`),
        '--resume',
      ],
      {
        env: { PYTHONPATH: STAND_IN_DIR, PYTHONUNBUFFERED: '1' },
        stdout: 'ignore',
        stderr: 'ignore',
      },
    );
    times.push(performance.now() - t0);
  }
  return times;
}

async function main(): Promise<void> {
  const root = tempDir('bench-queue');
  const redis = await startEmbeddedRedis({ dir: join(root, 'redis') });
  try {
    const artifacts = join(root, 'artifacts');
    const audit = writeFixtureAudit(
      artifacts,
      'bench',
      Array.from({ length: RUNS }, () => ({ updates: 1, knobs: { noop: true } })),
    );
    const sample = audit.runs[0]!.manifestPath;
    const before = await timeNoop(sample, join(root, 'baseline'), BASELINE_SAMPLES / 2, SLOTS);

    const conn = queueConnection(redis, 'bench');
    // Production timings (30 s locks), except a short idle poll so the pool closes quickly.
    const tuning = resolveTuning({ drainDelayS: 1 }, {});
    const pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: STAND_IN_DIR, module: 'stand_in_trainer' }),
      slots: Array.from({ length: SLOTS }, () => ({ gpu: null, threads: 1 })),
      tuning,
    });
    const queues = openQueues(conn);
    const t0 = Date.now();
    await submitAudit(conn, artifacts, audit, tuning);
    const enqueueMs = Date.now() - t0;
    await waitFor(
      'the queue to drain',
      async () => (await queues.runs.getJobCounts('completed')).completed === RUNS,
      3_600_000,
      200,
    );
    const drainMs = Date.now() - t0;
    await pool.shutdown();

    const jobs = (await queues.runs.getCompleted(0, -1)).filter(Boolean);
    await queues.close();
    const after = await timeNoop(sample, join(root, 'baseline'), BASELINE_SAMPLES / 2, SLOTS);

    const firstStarts = [...jobs].sort((a, b) => (a.processedOn ?? 0) - (b.processedOn ?? 0)).slice(0, SLOTS);
    const enqueueToStart = firstStarts.map((j) => (j.processedOn ?? 0) - j.timestamp);
    const gaps: number[] = [];
    const bySlot = new Map<string, typeof jobs>();
    for (const job of jobs) {
      const slot = job.processedBy ?? 'unknown';
      bySlot.set(slot, [...(bySlot.get(slot) ?? []), job]);
    }
    for (const list of bySlot.values()) {
      list.sort((a, b) => (a.processedOn ?? 0) - (b.processedOn ?? 0));
      for (let i = 1; i < list.length; i += 1) gaps.push((list[i]!.processedOn ?? 0) - (list[i - 1]!.finishedOn ?? 0));
    }
    // Paired: each job against its own trainer process, measured by the worker.
    const processMs = jobs.map((j) => (j.returnvalue?.process_s ?? 0) * 1000);
    const noop = median(processMs);
    const inJob = jobs.map((j, i) => (j.finishedOn ?? 0) - (j.processedOn ?? 0) - processMs[i]!);
    const inJobRatio = jobs.map((_, i) => inJob[i]! / processMs[i]!);
    const perRun = (drainMs * SLOTS) / RUNS - noop;
    const alone = median([...before, ...after]);

    const cores = execFileSync('nproc', { encoding: 'utf8' }).trim();
    const row = (label: string, ms: number) =>
      `  ${label.padEnd(38)} ${ms.toFixed(1).padStart(8)} ms   ${(ms / noop).toFixed(3)} x no-op`;
    const info = (label: string, value: string, note: string) =>
      `  ${label.padEnd(38)} ${value.padStart(8)} ms   ${note}`;
    const lines = [
      `queue overhead: ${RUNS} runs, ${SLOTS} worker slots, ${cores} cores, bullmq + redis-server on 127.0.0.1`,
      info(
        'no-op trainer process, in the queue',
        noop.toFixed(1),
        `median over the ${RUNS} runs (spawn to exit, timed by the worker)`,
      ),
      info(
        'no-op trainer process, alone',
        alone.toFixed(1),
        `median of ${before.length + after.length}, ${SLOTS} at a time, before and after the drain`,
      ),
      info(`enqueue ${RUNS} runs (one flow)`, String(enqueueMs), `${(enqueueMs / RUNS).toFixed(2)} ms per run`),
      info('drain', String(drainMs), `${(RUNS / (drainMs / 1000)).toFixed(1)} runs/s`),
      row('enqueue -> start (first runs)', median(enqueueToStart)),
      row('finish -> next start (median)', median(gaps)),
      row('finish -> next start (p95)', p95(gaps)),
      row('in-job overhead (median)', median(inJob)),
      row('in-job overhead (p95)', p95(inJob)),
      `  ${'in-job overhead / own process time'.padEnd(38)} ${median(inJobRatio).toFixed(3).padStart(8)}      median of the per-run ratios`,
      row('per run, all in (drain x slots / runs)', perRun),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await redis.stop();
    removeDir(root);
  }
}

try {
  await main();
} catch (error) {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
}

/**
 * The controller at lab scale: `submit`, Redis memory, `status`, the dashboard snapshot, queue
 * overhead and `report` at 100, 1,000 and 10,000 runs, on a real redis-server and real BullMQ.
 *
 *   npx tsx bench/scale.ts [--sizes 100,1000] [--updates 32] [--drain 60] [--slots 2] [--keep DIR]
 *   npx tsx bench/scale.ts --sizes 100,1000,10000     # the table in docs/benchmarks.md
 *   npx tsx bench/scale.ts --report-only --sizes 1000,10000   # `report` alone (no Redis, no submit)
 *   npx tsx bench/scale.ts --quick --baseline /tmp/base --sizes 100,1000,10000   # submit + status only,
 *                         side by side with the CLI built in /tmp/base (`git archive REV | tar -x`, `npx tsc`)
 *   npx tsx bench/scale.ts --help
 *   --record NAME also writes the output as the benchmark record bench/results/<date>-NAME.md
 *
 * For each size N, on a fresh private redis-server (the one `run` starts: 127.0.0.1, append-only):
 * - submit      `canary-audit submit GRID --json` (the built CLI, one process, wall time): the
 *               quickstart grid (2 visibilities x 3 doses) with as many seeds as make N runs, and
 *               `training.updates` set by --updates (rows per run = updates x 16, the quickstart's
 *               batch): the manifests, rows and the one BullMQ flow;
 * - Redis       INFO memory used_memory before and after submit, per queued run (and before and
 *               after deleting 20 waiting runs whole); a finished
 *               run's own keys after --drain runs went through real workers (MEMORY USAGE of
 *               its job hash, job log and loss curve, the median over 20) (BullMQ's events stream is one per queue,
 *               capped at ~10,000 entries: printed apart, as is used_memory's growth over the drain);
 * - status      one status read in-process (collectStatus, the median of 5) and its Redis time
 *               (the CPU of Redis's main thread over the call, INFO cpu) and command count (INFO
 *               commandstats: a script's commands count one by one); the same for
 *               the read it replaced (per run: HGETALL, then BullMQ's getState script with its
 *               ZSCOREs and LPOS), measured side by side: the ratio is the baseline's time over the
 *               new one's; and `status AUDIT --json` and plain `status AUDIT` through the CLI (one
 *               process each, wall, the median of 3);
 * - dashboard   one snapshot of the dashboard's poller (StatusSource.poll: status of every audit,
 *               the fleet, loss curves, views), the median of 3;
 * - overhead    --drain runs drained by --slots in-process workers whose trainer is the stand-in
 *               (test/runner/stand_in_trainer.py: the trainer's CLI, progress protocol and result,
 *               a SHA-256 chain for a model, 1 ms per update): per job, start -> finish minus the
 *               trainer process's own time, median;
 * - report      `computeReport` (2,000 resamples) on a finished audit of N runs built from stored
 *               scores (test/fixtures/audit-builder.ts: 4 focal + 4 held-out canaries per run,
 *               hidden probes, true code + 99 sampled decoys), the same cells as the grid.
 * --quick skips the dashboard, the drain and `report` (their rows print '-'). --baseline DIR runs the
 * CLI built in DIR (DIR/dist/cli/main.js, another commit of this project) beside this one: its
 * `submit` of the same grid (its own queue prefix and artifact folder, just before this one's) and its
 * `status AUDIT --json` on this one's audit and its `status --help` (each alternated with this one's),
 * each a row of its own with the ratio baseline / this one.
 * The growth column is each figure over the one at the previous size: linear growth is the size
 * ratio (10), constant is 1. Goals (issue 36): submit of 10,000 runs <= 30 s, Redis <= 2 KB per
 * finished run, status <= 1 s, report <= 60 s.
 */
import { recordStdout } from './records.js';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { execa } from 'execa';
import { docHelp } from './help.js';

const HELP = docHelp(import.meta.url);
const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '100,1000' },
    updates: { type: 'string', default: '32' },
    drain: { type: 'string', default: '60' },
    slots: { type: 'string', default: '2' },
    keep: { type: 'string' },
    'report-only': { type: 'boolean', default: false },
    quick: { type: 'boolean', default: false },
    baseline: { type: 'string' },
    record: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
if (values.record !== undefined)
  recordStdout(values.record, 'the controller at 100 / 1,000 / 10,000 runs (`bench/scale.ts`)');
const SIZES = values.sizes!.split(',').map((s) => Number(s.trim()));
const UPDATES = Number(values.updates);
const DRAIN = Number(values.drain);
const SLOTS = Number(values.slots);
for (const [name, v] of [
  ['--sizes', Math.min(...SIZES)],
  ['--updates', UPDATES],
  ['--drain', DRAIN],
  ['--slots', SLOTS],
] as const) {
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(
      `bench/scale.ts: ${name} must be whole numbers >= 1 (got ${JSON.stringify(values[name.slice(2) as 'sizes'])}); see --help\n`,
    );
    process.exit(2);
  }
}

// Before the product's modules load (the logger reads it once): worker chatter off.
process.env.CANARY_AUDIT_LOG_LEVEL ??= 'warn';
process.env.STAND_IN_STEP_S ??= '0.001';
const { STAND_IN_DIR, removeDir, tempDir, waitFor } = await import('../test/queue/helpers/fixtures.js');
const { collectStatus, openQueues, openRedis, queueConnection, resolveTuning, startEmbeddedRedis } = await import(
  '../src/queue/index.js'
);
const { WorkerPool } = await import('../src/worker/index.js');
const { StatusSource } = await import('../src/dashboard/source.js');
const { localRunner } = await import('../src/runner/index.js');
const { computeReport } = await import('../src/report/index.js');
const { buildFixtureAudit } = await import('../test/fixtures/audit-builder.js');

type Conn = ReturnType<typeof queueConnection>;
type Client = ReturnType<typeof openRedis>;

const CLI = resolve('dist/cli/main.js');
const BASE_CLI = values.baseline ? resolve(values.baseline, 'dist/cli/main.js') : null;
const QUICK = values.quick;
const QUICKSTART = readFileSync(resolve('configs/quickstart.yaml'), 'utf8');
const CELLS = 6;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** used_memory less the buffers that come and go with traffic (clients' buffers, the AOF buffer). */
async function usedMemory(client: Client): Promise<number> {
  const info = await client.info('memory');
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return field('used_memory') - field('mem_clients_normal') - field('mem_clients_slaves') - field('mem_aof_buffer');
}

/** Calls and usec over all commands, from INFO commandstats. */
async function commandTotals(client: Client): Promise<{ calls: number; usec: number }> {
  let calls = 0;
  let usec = 0;
  for (const m of (await client.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    if (m[1] === 'info' || m[1] === 'config') continue;
    calls += Number(m[2]);
    usec += Number(m[3]);
  }
  return { calls, usec };
}

/**
 * CPU seconds of Redis's main thread (INFO cpu). Not commandstats' usec: a command run inside MULTI
 * or a script is counted there twice (itself and inside EXEC/EVAL), so its sum overstates reads that
 * batch their commands.
 */
async function mainThreadCpuS(client: Client): Promise<number> {
  const info = await client.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread');
}

/** Wall ms, Redis main-thread CPU ms and commands of one call, with nothing else talking to this Redis. */
async function measured(
  admin: Client,
  fn: () => Promise<unknown>,
): Promise<{ ms: number; redisMs: number; calls: number }> {
  await admin.config('RESETSTAT');
  const cpu0 = await mainThreadCpuS(admin);
  const t0 = performance.now();
  await fn();
  const ms = performance.now() - t0;
  const cpu1 = await mainThreadCpuS(admin);
  const { calls } = await commandTotals(admin);
  return { ms, redisMs: (cpu1 - cpu0) * 1000, calls };
}

/** The read status made before: per run, the job hash and BullMQ's getState script (LPOS on the wait list). */
async function previousStatusRead(_conn: Conn, auditId: string, queues: ReturnType<typeof openQueues>): Promise<void> {
  const parent = await queues.audits.getJob(auditId);
  if (!parent) throw new Error(`no audit ${auditId}`);
  await parent.getState();
  await Promise.all(
    parent.data.runs.map(async ({ run_id }) => {
      const job = await queues.runs.getJob(run_id);
      if (job) await job.getState();
    }),
  );
}

function gridFor(n: number): { text: string; runs: number } {
  // At most n runs: the grid refuses more than 10,000 cells by default.
  const seeds = Math.max(1, Math.floor(n / CELLS));
  const text = QUICKSTART.replace(/^name: .*$/m, `name: scale-${n}`)
    .replace(/^(\s*)seed: \[0, 1, 2\].*$/m, `$1seed: [${Array.from({ length: seeds }, (_, i) => i).join(', ')}]`)
    .replace(/^(\s*)updates: \d+.*$/m, `$1updates: ${UPDATES}`)
    .replace(/^(\s*)checkpoint_every: \d+.*$/m, `$1checkpoint_every: ${UPDATES}`);
  if (!text.includes(`seed: [0, 1, 2, `) && seeds > 3)
    throw new Error('configs/quickstart.yaml changed shape: its seed axis was not found');
  return { text, runs: seeds * CELLS };
}

interface Point {
  runs: number;
  submitS: number;
  submitCpuS: number | null;
  queuedBytes: number;
  finishedBytes: number | null;
  queuedRunBytes: number | null;
  finished: number;
  drainGrowth: number;
  queuedHash: number;
  parts: { hash: number; logs: number; loss: number; events: { len: number; bytes: number } };
  statusMs: number;
  statusRedisMs: number;
  statusCalls: number;
  oldMs: number;
  oldRedisMs: number;
  oldCalls: number;
  cliJsonMs: number;
  cliPlainMs: number;
  cliHelpMs: number;
  cliJsonCpuMs: number;
  cliHelpCpuMs: number;
  baseCliJsonCpuMs: number | null;
  baseSubmitS: number | null;
  baseSubmitCpuS: number | null;
  baseCliJsonMs: number | null;
  baseCliHelpMs: number | null;
  baseCliHelpCpuMs: number | null;
  dashboardMs: number | null;
  overheadMs: number | null;
  reportS: number | null;
  diskMB: number;
}

/** `submit GRID --json` through a built CLI, under /usr/bin/time: wall s, CPU s, its stdout. */
async function timedSubmit(
  cli: string,
  gridPath: string,
  artifacts: string,
  env: NodeJS.ProcessEnv,
): Promise<{ wallS: number; cpuS: number | null; stdout: string }> {
  const t0 = performance.now();
  // Under /usr/bin/time: on a machine shared with other jobs, CPU seconds are the steadier figure.
  const submitted = await execa(
    '/usr/bin/time',
    ['-f', 'cpu %U %S', 'node', cli, 'submit', gridPath, '--artifacts', artifacts, '--json'],
    { env },
  );
  const wallS = (performance.now() - t0) / 1000;
  const cpu = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(submitted.stderr);
  return { wallS, cpuS: cpu ? Number(cpu[1]) + Number(cpu[2]) : null, stdout: submitted.stdout };
}

async function measure(n: number, root: string): Promise<Point> {
  const dir = join(root, `n${n}`);
  mkdirSync(dir, { recursive: true });
  const redis = await startEmbeddedRedis({ dir: join(dir, 'redis') });
  const conn = queueConnection(redis, 'bench');
  const admin = openRedis(conn);
  const queues = openQueues(conn);
  const client = openRedis(conn);
  try {
    const grid = gridFor(n);
    const gridPath = join(dir, 'grid.yaml');
    writeFileSync(gridPath, grid.text);
    const artifacts = join(dir, 'artifacts');
    const env = { ...process.env, REDIS_URL: redis.url, CANARY_AUDIT_QUEUE_PREFIX: 'bench' };

    const baseSubmit = BASE_CLI
      ? await timedSubmit(BASE_CLI, gridPath, join(dir, 'artifacts-baseline'), {
          ...env,
          CANARY_AUDIT_QUEUE_PREFIX: 'baseline',
        })
      : null;
    const mem0 = await usedMemory(admin);
    const submitted = await timedSubmit(CLI, gridPath, artifacts, env);
    const auditId = (JSON.parse(submitted.stdout) as { audit_id: string }).audit_id;
    const mem1 = await usedMemory(admin);
    const diskMB = Number(execFileSync('du', ['-sm', artifacts], { encoding: 'utf8' }).split('\t')[0]);

    // Warm both reads once (connections, scripts loaded), then alternate them.
    await collectStatus(conn, auditId, { queues, client });
    await previousStatusRead(conn, auditId, queues);
    const news = [];
    const olds = [];
    for (let i = 0; i < 5; i += 1) {
      news.push(await measured(admin, () => collectStatus(conn, auditId, { queues, client })));
      if (i < 3) olds.push(await measured(admin, () => previousStatusRead(conn, auditId, queues)));
    }
    // Wall ms and CPU ms (user + system, /usr/bin/time) of one `status` process.
    const once = async (cli: string, args: string[]) => {
      const t = performance.now();
      const r = await execa('/usr/bin/time', ['-f', 'cpu %U %S', 'node', cli, 'status', ...args], {
        env,
        stdout: 'ignore',
      });
      const cpu = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(r.stderr);
      return { ms: performance.now() - t, cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : Number.NaN };
    };
    const cli = async (args: string[], other?: string) => {
      const mine = [];
      const others = [];
      for (let i = 0; i < 3; i += 1) {
        mine.push(await once(CLI, args));
        if (other) others.push(await once(other, args));
      }
      return {
        ms: median(mine.map((x) => x.ms)),
        cpuMs: median(mine.map((x) => x.cpuMs)),
        otherMs: others.length ? median(others.map((x) => x.ms)) : null,
        otherCpuMs: others.length ? median(others.map((x) => x.cpuMs)) : null,
      };
    };
    const jsonTimes = await cli([auditId, '--json'], BASE_CLI ?? undefined);
    const cliPlainMs = (await cli([auditId])).ms;
    // The floor of any CLI call on this machine: Node's start-up and the command's modules.
    const helpTimes = await cli(['--help'], BASE_CLI ?? undefined);
    // What --quick measures too: submit, Redis per queued run, status.
    const common = {
      runs: grid.runs,
      submitS: submitted.wallS,
      submitCpuS: submitted.cpuS,
      queuedBytes: (mem1 - mem0) / grid.runs,
      statusMs: median(news.map((x) => x.ms)),
      statusRedisMs: median(news.map((x) => x.redisMs)),
      statusCalls: median(news.map((x) => x.calls)),
      oldMs: median(olds.map((x) => x.ms)),
      oldRedisMs: median(olds.map((x) => x.redisMs)),
      oldCalls: median(olds.map((x) => x.calls)),
      cliJsonMs: jsonTimes.ms,
      cliPlainMs,
      cliHelpMs: helpTimes.ms,
      cliJsonCpuMs: jsonTimes.cpuMs,
      cliHelpCpuMs: helpTimes.cpuMs,
      baseCliJsonCpuMs: jsonTimes.otherCpuMs,
      baseSubmitS: baseSubmit?.wallS ?? null,
      baseSubmitCpuS: baseSubmit?.cpuS ?? null,
      baseCliJsonMs: jsonTimes.otherMs,
      baseCliHelpMs: helpTimes.otherMs,
      baseCliHelpCpuMs: helpTimes.otherCpuMs,
      diskMB,
    };
    if (QUICK) {
      return {
        ...common,
        finishedBytes: null,
        queuedRunBytes: null,
        finished: 0,
        drainGrowth: 0,
        queuedHash: 0,
        parts: { hash: 0, logs: 0, loss: 0, events: { len: 0, bytes: 0 } },
        dashboardMs: null,
        overheadMs: null,
        reportS: null,
      };
    }

    const source = new StatusSource(conn, { intervalMs: 60_000, actions: false, artifactsDir: artifacts });
    const dash = [];
    await source.poll();
    for (let i = 0; i < 3; i += 1) {
      const t = performance.now();
      await source.poll();
      dash.push(performance.now() - t);
    }

    // Drain a sample through real workers and the stand-in trainer.
    const tuning = resolveTuning({ drainDelayS: 1 }, {});
    const mem2 = await usedMemory(admin);
    const queuedId = ((await queues.runs.getWaiting(0, 0))[0]?.id ?? '') as string;
    const queuedHash = Number((await admin.call('MEMORY', 'USAGE', queues.runs.toKey(queuedId), 'SAMPLES', '0')) ?? 0);
    const pool = await WorkerPool.start({
      conn,
      artifactsDir: artifacts,
      runner: localRunner({ trainerPath: STAND_IN_DIR, module: 'stand_in_trainer' }),
      slots: Array.from({ length: SLOTS }, () => ({ gpu: null, threads: 1 })),
      tuning,
    });
    const drain = Math.min(DRAIN, grid.runs);
    await waitFor(
      `${drain} runs to finish`,
      async () => ((await queues.runs.getJobCounts('completed')).completed ?? 0) >= drain,
      3_600_000,
      200,
    );
    await pool.shutdown();
    const mem3 = await usedMemory(admin);
    const done = (await queues.runs.getCompleted(0, -1)).filter(Boolean);
    const overhead = done.map(
      (j) => (j.finishedOn ?? 0) - (j.processedOn ?? 0) - (j.returnvalue?.process_s ?? 0) * 1000,
    );
    // Runs the shutdown interrupted went back to the queue: only finished ones count.
    // used_memory over the drain also holds what does not grow with runs (the workers' scripts,
    // the events stream BullMQ caps per queue): a finished run is its own keys, measured below.
    const drainGrowth = mem3 - mem2;
    // Where a finished run's bytes are: its job hash, its job log, its loss curve; the events stream is one per queue, capped.
    const usage = async (key: string) => Number((await admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    const parts = { hash: [] as number[], logs: [] as number[], loss: [] as number[] };
    for (const job of done.slice(0, 20)) {
      parts.hash.push(await usage(queues.runs.toKey(job.id!)));
      parts.logs.push(await usage(`${queues.runs.toKey(job.id!)}:logs`));
      parts.loss.push(await usage(`${conn.prefix}:loss:${job.id}`));
    }
    // A queued run's bytes: used_memory before and after deleting 20 waiting runs whole (hash, wait-list entry, the parent's dependency).
    const waiting = (await queues.runs.getWaiting(0, 19)).filter(Boolean);
    const beforeQueuedDelete = await usedMemory(admin);
    const tq = admin.multi();
    for (const job of waiting) {
      tq.del(queues.runs.toKey(job.id!));
      tq.lrem(queues.runs.keys.wait as string, 1, job.id!);
      tq.srem(`${queues.audits.toKey(auditId)}:dependencies`, queues.runs.toKey(job.id!));
    }
    await tq.exec();
    const queuedRunBytes =
      waiting.length > 0 ? (beforeQueuedDelete - (await usedMemory(admin))) / waiting.length : null;
    const events = {
      len: Number(await admin.xlen(queues.runs.keys.events as string)),
      bytes: await usage(queues.runs.keys.events as string),
    };
    await source.close();

    return {
      ...common,
      finishedBytes: done.length > 0 ? median(parts.hash) + median(parts.logs) + median(parts.loss) : null,
      queuedRunBytes,
      finished: done.length,
      drainGrowth,
      queuedHash,
      parts: { hash: median(parts.hash), logs: median(parts.logs), loss: median(parts.loss), events },
      dashboardMs: median(dash),
      overheadMs: overhead.length ? median(overhead) : null,
      reportS: await timeReport(join(dir, 'report'), grid.runs),
    };
  } finally {
    client.disconnect();
    admin.disconnect();
    await queues.close();
    await redis.stop();
  }
}

async function timeReport(root: string, runs: number): Promise<number> {
  const visibilities = ['visible', 'redacted'];
  const doses = [1, 4, 16];
  const code = (i: number, salt: number) => String((i * 613 + salt) % 10000).padStart(4, '0');
  const audit = await buildFixtureAudit(root, {
    name: `scale-report-${runs}`,
    runs: Array.from({ length: runs }, (_, r) => {
      const visibility = visibilities[r % 2]!;
      const dose = doses[Math.floor(r / 2) % 3]!;
      return {
        cell: { visibility, dose, seed: Math.floor(r / CELLS) },
        canaries: Array.from({ length: 4 }, (_, i) => ({ id: `f${i}`, code: code(i + r, 17), dose, visibility })),
        heldOut: Array.from({ length: 4 }, (_, i) => ({ id: `h${i}`, code: code(i + r, 5003) })),
        space: { kind: 'sampled' as const, decoys: 99 },
      };
    }),
    outcome: (c) => ({
      rank: c.canary.inserted
        ? 1 + ((c.runIndex * 31 + Number(c.canary.code)) % 20)
        : 1 + ((Number(c.canary.code) * 13 + c.runIndex) % 100),
    }),
  });
  const t = performance.now();
  await computeReport({ auditDir: audit.auditDir, resamples: 2000 });
  return (performance.now() - t) / 1000;
}

const root = values.keep ? resolve(values.keep) : tempDir('bench-scale');
if (values['report-only']) {
  try {
    const lines = [
      `report (2,000 resamples) on a finished audit built from stored scores, ${execFileSync('nproc', { encoding: 'utf8' }).trim()} cores`,
    ];
    let previous: number | null = null;
    for (const n of SIZES) {
      const runs = gridFor(n).runs;
      const s = await timeReport(join(root, `report-${n}`), runs);
      lines.push(
        `  ${String(runs).padStart(6)} runs  ${s.toFixed(1).padStart(7)} s${previous ? `   growth ${(s / previous).toFixed(1)}` : ''}`,
      );
      previous = s;
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    if (!values.keep) removeDir(root);
  }
  process.exit(0);
}
const points: Point[] = [];
try {
  for (const n of SIZES) {
    process.stderr.write(`measuring ${n} runs...\n`);
    points.push(await measure(n, root));
  }
} finally {
  if (!values.keep) removeDir(root);
}

const cores = execFileSync('nproc', { encoding: 'utf8' }).trim();
const f = (x: number | null, d = 0) => (x === null ? '-' : x.toFixed(d));
const rows: [string, (p: Point) => number | null, number, string][] = [
  ['submit (CLI, wall)', (p) => p.submitS, 1, 's'],
  ['  its CPU (user + system)', (p) => p.submitCpuS, 1, 's'],
  ...(BASE_CLI
    ? ([
        ['baseline submit (CLI, wall)', (p) => p.baseSubmitS, 1, 's'],
        ['  its CPU (user + system)', (p) => p.baseSubmitCpuS, 1, 's'],
      ] as [string, (p: Point) => number | null, number, string][])
    : []),
  ['artifacts written', (p) => p.diskMB, 0, 'MB'],
  ['Redis per queued run', (p) => p.queuedBytes, 0, 'B'],
  ['  20 deleted whole, each', (p) => p.queuedRunBytes, 0, 'B'],
  ['Redis per finished run', (p) => p.finishedBytes, 0, 'B'],
  ['  MEMORY USAGE, job queued', (p) => p.queuedHash, 0, 'B'],
  ['status read (in-process)', (p) => p.statusMs, 1, 'ms'],
  ['  its Redis CPU (main thread)', (p) => p.statusRedisMs, 2, 'ms'],
  ['  its Redis commands', (p) => p.statusCalls, 0, ''],
  ['previous status read', (p) => p.oldMs, 1, 'ms'],
  ['  its Redis CPU (main thread)', (p) => p.oldRedisMs, 2, 'ms'],
  ['  its Redis commands', (p) => p.oldCalls, 0, ''],
  ['status AUDIT --json (CLI)', (p) => p.cliJsonMs, 0, 'ms'],
  ['  its CPU (user + system)', (p) => p.cliJsonCpuMs, 0, 'ms'],
  ...(BASE_CLI
    ? ([
        ['baseline status --json (CLI)', (p) => p.baseCliJsonMs, 0, 'ms'],
        ['  its CPU (user + system)', (p) => p.baseCliJsonCpuMs, 0, 'ms'],
      ] as [string, (p: Point) => number | null, number, string][])
    : []),
  ['status AUDIT (CLI, plain)', (p) => p.cliPlainMs, 0, 'ms'],
  ['  CLI start-up (status --help)', (p) => p.cliHelpMs, 0, 'ms'],
  ['  its CPU (user + system)', (p) => p.cliHelpCpuMs, 0, 'ms'],
  ...(BASE_CLI
    ? ([
        ['baseline status --help (CLI)', (p) => p.baseCliHelpMs, 0, 'ms'],
        ['  its CPU (user + system)', (p) => p.baseCliHelpCpuMs, 0, 'ms'],
      ] as [string, (p: Point) => number | null, number, string][])
    : []),
  ['dashboard snapshot', (p) => p.dashboardMs, 1, 'ms'],
  ['queue overhead per job', (p) => p.overheadMs, 1, 'ms'],
  ['report (2,000 resamples)', (p) => p.reportS, 1, 's'],
];
const lines = [
  `scale: ${points.map((p) => p.runs).join(' / ')} runs; ${UPDATES} updates per run; ${SLOTS} worker slots draining ${DRAIN} runs per size; ${cores} cores; redis-server ${execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).match(/v=(\S+)/)?.[1]}`,
  `${'figure'.padEnd(28)} ${points.map((p) => `${p.runs} runs`.padStart(12)).join(' ')}   growth per step`,
];
for (const [label, get, digits, unit] of rows) {
  const xs = points.map(get);
  const growth = xs.slice(1).map((x, i) => (x !== null && xs[i] ? (x / (xs[i] as number)).toFixed(1) : '-'));
  lines.push(
    `${label.padEnd(28)} ${xs.map((x) => `${f(x, digits)} ${unit}`.padStart(12)).join(' ')}   ${growth.join(', ')}`,
  );
}
const ratio = points.map((p) => `${(p.oldRedisMs / p.statusRedisMs).toFixed(1)}x`).join(' / ');
lines.push(
  `previous / new status read, Redis CPU: ${ratio}; runs finished in the drain: ${points.map((p) => p.finished).join(' / ')}`,
);
if (BASE_CLI) {
  const r = (a: number | null, b: number | null) => (a !== null && b ? `${(a / b).toFixed(2)}x` : '-');
  lines.push(
    `baseline (${values.baseline}) / this: submit wall ${points.map((p) => r(p.baseSubmitS, p.submitS)).join(' / ')}, submit CPU ${points.map((p) => r(p.baseSubmitCpuS, p.submitCpuS)).join(' / ')}, status --json ${points.map((p) => r(p.baseCliJsonMs, p.cliJsonMs)).join(' / ')}, its CPU ${points.map((p) => r(p.baseCliJsonCpuMs, p.cliJsonCpuMs)).join(' / ')}, status --help ${points.map((p) => r(p.baseCliHelpMs, p.cliHelpMs)).join(' / ')}, its CPU ${points.map((p) => r(p.baseCliHelpCpuMs, p.cliHelpCpuMs)).join(' / ')}`,
  );
}
for (const p of QUICK ? [] : points) {
  lines.push(
    `  ${p.runs} runs, a finished run's keys (median): job hash ${p.parts.hash} B, job log ${p.parts.logs} B, loss curve ${p.parts.loss} B; the queue's events stream (capped by BullMQ) ${p.parts.events.len} entries, ${p.parts.events.bytes} B; used_memory grew ${(p.drainGrowth / 1024).toFixed(0)} KiB over the drain of ${p.finished} runs`,
  );
}
process.stdout.write(`${lines.join('\n')}\n`);

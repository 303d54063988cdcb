import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, type WriteStream } from 'node:fs';
import { join, resolve } from 'node:path';
import { Queue } from 'bullmq';
import { collectStatus, queueConnection, redisTargetFrom, submitAudit } from '../../../src/queue/index.js';
import { RUNS_QUEUE } from '../../../src/queue/names.js';
import { sleep } from '../../../src/sleep.js';
import { SHUTDOWN_MARGIN_MS } from '../../../src/worker/index.js';
import { fastTuning, standInEnv, waitFor, writeFixtureAudit } from './fixtures.js';
import { trainedTwice } from './outage-drill.js';
import { pidAlive } from '../../../src/pid.js';

/**
 * The partition drill: a Redis host and `hosts` worker hosts, each a network namespace the drill
 * makes itself, joined by one veth pair per worker host (10.231.<i>.0/30: Redis side .1, host side
 * .2; the controller — this process — reaches Redis over 10.231.250.0/30). Each host runs the real
 * `worker` CLI (`--cpu slots`, its own UTS name) with the stand-in trainer. The drill:
 *  1. cuts host 0's link (link down on its side) for `cutMs` (> the lock) once it runs a trainer:
 *     its runs must be handed to other hosts within the cut, and its trainers must stop (it cannot
 *     renew its locks); the other hosts need free slots within the cut (fewer runs than slots, or runs
 *     short enough that some end within it);
 *  2. heals it, then cuts every host from Redis for `outageMs`, and heals: the runs active then
 *     (there must be some: runs must last longer than step 1) must stop their trainers too;
 * then waits for the audit to finish, and stops every worker with one SIGTERM, which each must obey
 * within its bound (--stop-grace-s 10 + SHUTDOWN_MARGIN_MS). Every run must complete once (one
 * `done` in the stand-in's .trained record), no update may be trained by two trainers, and every
 * result must equal an undisturbed run of the same manifest. Everything made (namespaces, links,
 * processes) is removed in `finally`, on failure too, with no unbounded wait: a process that does
 * not stop is killed -9. Needs root and `ip`; touches no interface it did not make.
 */
export interface PartitionDrillOptions {
  dir: string;
  hosts: number;
  slots: number;
  runs: number;
  updates: number;
  stepS: number;
  lockMs: number;
  cutMs: number;
  outageMs: number;
}

export interface PartitionDrillReport {
  runs: number;
  completed: number;
  /** Runs with more than one attempt that trained to the end. */
  completedTwice: number;
  trainedTwice: number;
  identical: number;
  /** Runs host 0 trained when its link went down. */
  cut: number;
  /** Of those, runs another host had taken (active or completed there) by the end of the cut. */
  handedOver: number;
  /** Trainer pids of the cut host still alive after 2 locks with its link down. */
  cutTrainersAlive: number;
  /** Runs active when every host lost Redis, and how many of their trainers were alive at its end. */
  outageRuns: number;
  outageTrainersAlive: number;
  failures: string[];
  /** Takeovers of a run whose lock expired (BullMQ's stalled counter), summed over runs, and the most for one run. */
  stalls: number;
  maxStalls: number;
  /** Seconds each host's worker took to exit after the drill's one SIGTERM (null: not within the bound). */
  workerExitS?: (number | null)[];
  /** Each worker's own last line ("stopped in ... s; ..."): whether it force-closed, and why. */
  workerStops?: string[];
  /** Runs each host completed (host i at [i]): after the 2-minute cut, which hosts' slots trained again. */
  completedOnHost?: number[];
  /** For each run completed or trained twice: its stand-in records (.trained: pid first last how; .slots: start end). */
  doubles: string[];
}

const CLI = resolve('dist/cli/main.js');

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

export async function runPartitionDrill(o: PartitionDrillOptions): Promise<PartitionDrillReport> {
  const tag = (process.pid % 0xffff).toString(16).padStart(4, '0');
  const redisNs = `car-${tag}`;
  const hostNs = (i: number) => `cah${i}-${tag}`;
  const hostLink = (i: number) => `cv${i}h-${tag}`;
  const made: string[] = [];
  let redis: ChildProcess | undefined;
  const workers: ChildProcess[] = [];
  const logs: WriteStream[] = [];
  const artifacts = join(o.dir, 'artifacts');
  mkdirSync(join(o.dir, 'redis'), { recursive: true });
  try {
    ip('netns', 'add', redisNs);
    made.push(redisNs);
    ip('-n', redisNs, 'link', 'set', 'lo', 'up');
    // The controller's own link (this process stays in its namespace).
    ip('link', 'add', `cvc-${tag}`, 'type', 'veth', 'peer', 'name', `cvcr-${tag}`, 'netns', redisNs);
    made.push(`link:cvc-${tag}`);
    ip('addr', 'add', '10.231.250.2/30', 'dev', `cvc-${tag}`);
    ip('link', 'set', `cvc-${tag}`, 'up');
    ip('-n', redisNs, 'addr', 'add', '10.231.250.1/30', 'dev', `cvcr-${tag}`);
    ip('-n', redisNs, 'link', 'set', `cvcr-${tag}`, 'up');
    for (let i = 0; i < o.hosts; i += 1) {
      ip('netns', 'add', hostNs(i));
      made.push(hostNs(i));
      ip('-n', hostNs(i), 'link', 'set', 'lo', 'up');
      ip(
        '-n',
        redisNs,
        'link',
        'add',
        `cv${i}r-${tag}`,
        'type',
        'veth',
        'peer',
        'name',
        hostLink(i),
        'netns',
        hostNs(i),
      );
      ip('-n', redisNs, 'addr', 'add', `10.231.${i}.1/30`, 'dev', `cv${i}r-${tag}`);
      ip('-n', redisNs, 'link', 'set', `cv${i}r-${tag}`, 'up');
      ip('-n', hostNs(i), 'addr', 'add', `10.231.${i}.2/30`, 'dev', hostLink(i));
      ip('-n', hostNs(i), 'link', 'set', hostLink(i), 'up');
    }
    redis = spawn(
      'ip',
      [
        'netns',
        'exec',
        redisNs,
        'redis-server',
        '--port',
        '6379',
        '--bind',
        '0.0.0.0',
        '--protected-mode',
        'no',
      ].concat(['--dir', join(o.dir, 'redis'), '--appendonly', 'yes', '--save', '']),
      { stdio: 'ignore' },
    );
    const target = redisTargetFrom('redis://10.231.250.1:6379');
    if (!target) throw new Error('drill: no Redis target');
    const conn = queueConnection(target, 'partition');
    await waitFor('Redis in its namespace', async () => {
      try {
        await collectStatus(conn);
        return true;
      } catch {
        return false;
      }
    });

    const knobs = { step_s: o.stepS };
    const audit = writeFixtureAudit(
      artifacts,
      'partition',
      Array.from({ length: o.runs }, (_, i) => ({ updates: o.updates + i, checkpointEvery: 10, knobs })),
    );
    const tuning = fastTuning({ lockMs: o.lockMs, stalledMs: Math.max(500, o.lockMs / 2), stopGraceMs: 10_000 });
    await submitAudit(conn, artifacts, audit, tuning);
    const startHost = (i: number) => {
      const worker = spawn(
        'ip',
        ['netns', 'exec', hostNs(i), 'unshare', '--uts', 'sh', '-c', `hostname drill-h${i} && exec "$@"`, 'sh'].concat(
          [process.execPath, CLI, 'worker', '--cpu', String(o.slots), '--redis', `redis://10.231.${i}.1:6379`],
          ['--artifacts', artifacts, '--lock-ms', String(o.lockMs), '--stalled-ms', String(tuning.stalledMs)],
          ['--stop-grace-s', '10'],
        ),
        {
          stdio: ['ignore', 'ignore', 'pipe'],
          env: {
            ...process.env,
            ...standInEnv(),
            CANARY_AUDIT_QUEUE_PREFIX: 'partition',
            CANARY_AUDIT_LOG_LEVEL: 'info',
            CANARY_TRAINER_LOCK_WAIT_S: '4',
          },
        },
      );
      // Each host's log stays in the drill's folder (what a failed drill is diagnosed from).
      const logFile = createWriteStream(join(o.dir, `worker-h${i}.log`));
      logs.push(logFile);
      worker.stderr?.pipe(logFile);
      workers.push(worker);
    };
    const active = async () =>
      ((await collectStatus(conn, audit.auditId))[0]?.runs ?? []).filter((r) => r.state === 'active');
    // Host 0 first, until its slots train, so that it holds runs when its link goes down however
    // the hosts race for them; then the others, until every slot (or every run) trains.
    startHost(0);
    await waitFor(
      'host 0 to fill its slots',
      async () => (await active()).filter((r) => r.progress?.host === 'drill-h0').length >= Math.min(o.slots, o.runs),
      180_000,
      200,
    );
    for (let i = 1; i < o.hosts; i += 1) startHost(i);
    await waitFor(
      'every slot to train',
      async () => (await active()).length >= Math.min(o.runs, o.hosts * o.slots),
      180_000,
      200,
    );

    // 1. One host cut off, longer than the lock, while it trains.
    const onHost0 = await waitFor(
      'host 0 to train',
      async () => {
        const [s] = await collectStatus(conn, audit.auditId);
        const runs = s?.runs.filter(
          (r) => r.state === 'active' && r.progress?.host === 'drill-h0' && (r.progress?.update ?? 0) >= 3,
        );
        return runs && runs.length > 0 ? runs : undefined;
      },
      180_000,
      200,
    );
    const cutRuns = onHost0.map((r) => r.run_id);
    const cutPids = onHost0.map((r) => r.progress?.trainer_pid).filter((p): p is number => typeof p === 'number');
    ip('-n', hostNs(0), 'link', 'set', hostLink(0), 'down');
    await sleep(Math.max(o.cutMs, 2 * o.lockMs));
    const cutTrainersAlive = cutPids.filter(pidAlive).length;
    // Where host 0's runs are at the end of the cut: taken by another host (or done there).
    const [atCut] = await collectStatus(conn, audit.auditId);
    const handedOver = (atCut?.runs ?? []).filter(
      (r) =>
        cutRuns.includes(r.run_id) &&
        (r.state === 'active' || r.state === 'completed') &&
        r.progress?.host !== undefined &&
        r.progress.host !== 'drill-h0',
    ).length;
    ip('-n', hostNs(0), 'link', 'set', hostLink(0), 'up');

    // 2. Redis cut from every host at once, then healed.
    await sleep(2 * o.lockMs);
    const [atOutage] = await collectStatus(conn, audit.auditId);
    const outageActive = (atOutage?.runs ?? []).filter((r) => r.state === 'active');
    const outagePids = outageActive
      .map((r) => r.progress?.trainer_pid)
      .filter((p): p is number => typeof p === 'number');
    for (let i = 0; i < o.hosts; i += 1) ip('-n', hostNs(i), 'link', 'set', hostLink(i), 'down');
    await sleep(o.outageMs);
    // No host can renew a lock: every trainer must have stopped (when the outage outlasts the lock).
    const outageTrainersAlive = outagePids.filter(pidAlive).length;
    for (let i = 0; i < o.hosts; i += 1) ip('-n', hostNs(i), 'link', 'set', hostLink(i), 'up');

    const status = await waitFor(
      'the audit to finish',
      async () => {
        const [s] = await collectStatus(conn, audit.auditId);
        return s?.state === 'finished' ? s : undefined;
      },
      600_000,
      500,
    );
    const report: PartitionDrillReport = {
      runs: o.runs,
      completed: 0,
      completedTwice: 0,
      trainedTwice: 0,
      identical: 0,
      cut: cutRuns.length,
      handedOver,
      cutTrainersAlive,
      outageRuns: outageActive.length,
      outageTrainersAlive,
      failures: [],
      doubles: [],
      stalls: 0,
      maxStalls: 0,
    };
    const runsQueue = new Queue(RUNS_QUEUE, { connection: conn.options, prefix: conn.prefix });
    for (const run of audit.runs) {
      const stalled = (await runsQueue.getJob(run.runId))?.stalledCounter ?? 0;
      report.stalls += stalled;
      report.maxStalls = Math.max(report.maxStalls, stalled);
    }
    await runsQueue.close();
    for (const run of audit.runs) {
      const out = join(run.manifestPath, '..', 'output');
      const state = status.runs.find((r) => r.run_id === run.runId);
      if (state?.state === 'completed') {
        report.completed += 1;
        const host = /^drill-h(\d+)$/.exec(state.progress?.host ?? '')?.[1];
        report.completedOnHost ??= Array.from({ length: o.hosts }, () => 0);
        if (host !== undefined) report.completedOnHost[Number(host)] = (report.completedOnHost[Number(host)] ?? 0) + 1;
      } else report.failures.push(`${run.runId}: ${state?.state} ${state?.failure ?? ''}`);
      const trained = existsSync(join(out, '.trained')) ? readFileSync(join(out, '.trained'), 'utf8') : '';
      const twice = trained.split('\n').filter((l) => l.endsWith(' done')).length > 1;
      const overlap = trainedTwice(join(out, '.trained'));
      if (twice) report.completedTwice += 1;
      if (overlap) report.trainedTwice += 1;
      if (twice || overlap) {
        const slots = existsSync(join(out, '.slots')) ? readFileSync(join(out, '.slots'), 'utf8') : '';
        report.doubles.push(`${run.runId}: .trained [${lines(trained)}] .slots [${lines(slots)}]`);
      }
      if (
        existsSync(join(out, 'result.json')) &&
        acc(out) === referenceAcc(run.manifestPath, join(o.dir, 'ref', run.runId))
      )
        report.identical += 1;
    }
    // 3. Every worker must stop on one SIGTERM within its documented bound.
    const exits = await stopWithin(workers, 'SIGTERM', WORKER_STOP_BOUND_MS);
    report.workerExitS = exits.map((ms) => (ms === null ? null : Math.round(ms / 100) / 10));
    await sleep(100);
    report.workerStops = workers.map((_, i) => {
      const path = join(o.dir, `worker-h${i}.log`);
      const line = existsSync(path) ? /stopped in [^\n]*/.exec(readFileSync(path, 'utf8'))?.[0] : undefined;
      return line ?? '(no stop line)';
    });
    exits.forEach((ms, i) => {
      if (ms === null)
        report.failures.push(
          `host ${i}'s worker did not exit within ${WORKER_STOP_BOUND_MS / 1000} s of SIGTERM; its log ends: ${logTail(join(o.dir, `worker-h${i}.log`))}`,
        );
    });
    return report;
  } finally {
    // Nothing here may wait without a bound: a worker (or Redis) that ignores SIGTERM is killed.
    await stopWithin(workers, 'SIGTERM', WORKER_STOP_BOUND_MS);
    await stopWithin(workers, 'SIGKILL', 5_000);
    if (redis) {
      await stopWithin([redis], 'SIGTERM', 5_000);
      await stopWithin([redis], 'SIGKILL', 5_000);
    }
    // Trainers (or anything else) still running inside the drill's namespaces.
    for (const name of made) if (!name.startsWith('link:')) killNamespace(name);
    for (const logFile of logs) logFile.end();
    // Deleting a namespace deletes the veth ends in it, and so their peers; the controller's link too.
    for (const name of made.reverse()) {
      try {
        if (name.startsWith('link:')) ip('link', 'del', name.slice(5));
        else ip('netns', 'del', name);
      } catch {
        // already gone with its peer
      }
    }
  }
}

/** A worker's documented bound after SIGTERM: the drill's --stop-grace-s 10 + SHUTDOWN_MARGIN_MS. */
const WORKER_STOP_BOUND_MS = 10_000 + SHUTDOWN_MARGIN_MS;

/**
 * Send `signal` to every child still running and wait at most `boundMs` for each: the ms each took
 * to exit (0 if it had already exited), or null if it was still running at the bound.
 */
async function stopWithin(
  children: ChildProcess[],
  signal: NodeJS.Signals,
  boundMs: number,
): Promise<(number | null)[]> {
  const t0 = performance.now();
  return Promise.all(
    children.map(
      (child) =>
        new Promise<number | null>((done) => {
          if (child.exitCode !== null || child.signalCode !== null) return done(0);
          const timer = setTimeout(() => done(null), boundMs);
          child.once('exit', () => {
            clearTimeout(timer);
            done(performance.now() - t0);
          });
          child.kill(signal);
        }),
    ),
  );
}

/** The last lines of a worker's log, each cut to 300 characters (the drill's folder is removed after). */
function logTail(path: string, count = 3): string {
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
  return lines(
    text
      .trim()
      .split('\n')
      .slice(-count)
      .map((l) => l.slice(0, 300))
      .join('\n'),
  );
}

/** kill -9 every process left in a network namespace the drill made. */
function killNamespace(name: string): void {
  let pids: string[] = [];
  try {
    pids = execFileSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch {
    return;
  }
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

function lines(text: string): string {
  return text.trim().split('\n').join('; ');
}

function acc(out: string): string {
  return (JSON.parse(readFileSync(join(out, 'result.json'), 'utf8')) as { stand_in: { acc: string } }).stand_in.acc;
}

function referenceAcc(manifestPath: string, outDir: string): string {
  execFileSync('/usr/bin/python3', ['-m', 'stand_in_trainer', 'run', '--manifest', manifestPath, '--out', outDir], {
    env: { ...process.env, ...standInEnv(), PYTHONPATH: standInEnv().CANARY_AUDIT_TRAINER_PATH, STAND_IN_STEP_S: '0' },
    stdio: 'ignore',
  });
  return acc(outDir);
}

import { execFile } from 'node:child_process';
import type { Redis } from 'ioredis';
import { log } from '../log.js';
import { findOnPath } from './embedded-redis.js';
import type { RunProgress } from './job-data.js';
import type { QueueConnection } from './queues.js';

/**
 * What workers publish about themselves, for `status --workers` and the dashboard:
 *
 *   <prefix>:fleet:live:<worker_id>   string (JSON WorkerBeat), expires after 3 heartbeats
 *   <prefix>:fleet:seen               hash worker_id -> last WorkerBeat (a worker whose live key
 *                                     expired without a clean goodbye is "lost")
 *   <prefix>:fleet:stopped            hash worker_id -> {host, pid, stopped} of a clean goodbye,
 *                                     kept a day (so `status --workers` can say they stopped)
 *   <prefix>:loss:<run_id>            list of [update, loss] pairs, at most LOSS_POINTS per attempt,
 *                                     expiring a week after the last write
 *
 * A worker id is `host:pid`. Readers never write, except to drop `seen` entries older than a day.
 */
export const DEFAULT_HEARTBEAT_MS = 5_000;
export const LOSS_POINTS = 200;
const LOSS_TTL_S = 7 * 24 * 3600;
const SEEN_KEEP_MS = 24 * 3600 * 1000;

export interface GpuInfo {
  index: string;
  name: string;
  /** Utilisation in percent. */
  util: number | null;
  mem_used_mib: number | null;
  mem_total_mib: number | null;
}

export interface WorkerSlotBeat {
  index: number;
  gpu: string | null;
  run_id: string | null;
  audit_id: string | null;
}

export interface WorkerBeat {
  worker_id: string;
  host: string;
  pid: number;
  started: string;
  /** ms since the epoch of this heartbeat. */
  beat: number;
  interval_ms: number;
  runner: string;
  slots: WorkerSlotBeat[];
  gpus: GpuInfo[];
  /** The Slurm job this worker runs in (from SLURM_JOB_ID, SLURMD_NODENAME, ...); absent outside Slurm. */
  slurm?: SlurmJobInfo;
}

export interface SlurmJobInfo {
  job_id: string;
  /** Array jobs: the array's job id and this task's index. */
  array_job_id: string | null;
  array_task_id: string | null;
  node: string | null;
}

/** The Slurm job of this process, read from the variables Slurm sets in a job's environment. */
export function slurmJobInfo(env: NodeJS.ProcessEnv = process.env): SlurmJobInfo | null {
  const jobId = env.SLURM_JOB_ID;
  if (!jobId) return null;
  return {
    job_id: jobId,
    array_job_id: env.SLURM_ARRAY_JOB_ID || null,
    array_task_id: env.SLURM_ARRAY_TASK_ID || null,
    node: env.SLURMD_NODENAME || null,
  };
}

/** How a worker's Slurm job reads in one line: `slurm 1234_5 (job 1240) on node07`. */
export function describeSlurmJob(slurm: SlurmJobInfo): string {
  const id =
    slurm.array_job_id && slurm.array_task_id
      ? `${slurm.array_job_id}_${slurm.array_task_id} (job ${slurm.job_id})`
      : slurm.job_id;
  return `slurm ${id}${slurm.node ? ` on ${slurm.node}` : ''}`;
}

export type WorkerState = 'idle' | 'busy' | 'lost';

export interface WorkerStatus extends WorkerBeat {
  state: WorkerState;
  /** Seconds since the last heartbeat. */
  age_s: number;
}

export function fleetKeys(prefix: string) {
  return {
    live: (workerId: string) => `${prefix}:fleet:live:${workerId}`,
    livePattern: `${prefix}:fleet:live:*`,
    seen: `${prefix}:fleet:seen`,
    stopped: `${prefix}:fleet:stopped`,
    loss: (runId: string) => `${prefix}:loss:${runId}`,
  };
}

export function heartbeatMs(): number {
  const v = Number(process.env.CANARY_AUDIT_HEARTBEAT_MS);
  return Number.isFinite(v) && v >= 100 ? v : DEFAULT_HEARTBEAT_MS;
}

/** GPUs as nvidia-smi reports them now; [] where nvidia-smi is absent or fails. */
export function queryGpus(timeoutMs = 3_000): Promise<GpuInfo[]> {
  if (!findOnPath('nvidia-smi')) return Promise.resolve([]);
  return new Promise((resolve) => {
    execFile(
      'nvidia-smi',
      ['--query-gpu=index,name,utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'],
      { timeout: timeoutMs },
      (error, stdout) => {
        if (error) return resolve([]);
        resolve(parseNvidiaSmi(stdout));
      },
    );
  });
}

export function parseNvidiaSmi(text: string): GpuInfo[] {
  const num = (s: string | undefined) => {
    const n = Number((s ?? '').trim());
    return s !== undefined && s.trim() !== '' && Number.isFinite(n) ? n : null;
  };
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((line) => {
      const [index, name, util, used, total] = line.split(',').map((s) => s.trim());
      return {
        index: index ?? '?',
        name: name ?? '',
        util: num(util),
        mem_used_mib: num(used),
        mem_total_mib: num(total),
      };
    });
}

let pools = 0;

/** The heartbeat of one worker process: a live key refreshed every interval, a goodbye on close. */
export class FleetHeartbeat {
  private timer: NodeJS.Timeout | null = null;
  private readonly keys;
  private readonly started = new Date().toISOString();
  private readonly slurm = slurmJobInfo();
  readonly workerId: string;

  constructor(
    private readonly client: Redis,
    conn: QueueConnection,
    private readonly info: { host: string; runner: string; slots: () => WorkerSlotBeat[] },
    private readonly intervalMs: number = heartbeatMs(),
  ) {
    this.keys = fleetKeys(conn.prefix);
    // host:pid; a second pool in the same process (tests, embedded runs) gets host:pid.2, ...
    pools += 1;
    this.workerId = `${info.host}:${process.pid}${pools > 1 ? `.${pools}` : ''}`;
  }

  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat(), this.intervalMs);
    this.timer.unref();
  }

  async beat(): Promise<void> {
    try {
      const beat: WorkerBeat = {
        worker_id: this.workerId,
        host: this.info.host,
        pid: process.pid,
        started: this.started,
        beat: Date.now(),
        interval_ms: this.intervalMs,
        runner: this.info.runner,
        slots: this.info.slots(),
        gpus: await queryGpus(),
        ...(this.slurm ? { slurm: this.slurm } : {}),
      };
      const json = JSON.stringify(beat);
      await this.client
        .multi()
        .set(this.keys.live(this.workerId), json, 'PX', this.intervalMs * 3)
        .hset(this.keys.seen, this.workerId, json)
        .exec();
    } catch (error) {
      log.debug({ err: error }, 'heartbeat failed');
    }
  }

  /** A clean exit: the worker leaves the fleet instead of turning lost. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    try {
      const goodbye: StoppedWorker = {
        worker_id: this.workerId,
        host: this.info.host,
        pid: process.pid,
        stopped: Date.now(),
      };
      await this.client
        .multi()
        .del(this.keys.live(this.workerId))
        .hdel(this.keys.seen, this.workerId)
        .hset(this.keys.stopped, this.workerId, JSON.stringify(goodbye))
        .exec();
    } catch (error) {
      log.debug({ err: error }, 'fleet goodbye failed');
    }
  }
}

/** A worker that said goodbye (a clean stop), in the last day. */
export interface StoppedWorker {
  worker_id: string;
  host: string;
  pid: number;
  /** ms since the epoch. */
  stopped: number;
}

/** Workers that stopped cleanly in the last day, newest first (older entries are dropped). */
export async function readStoppedWorkers(
  client: Redis,
  prefix: string,
  now: number = Date.now(),
): Promise<StoppedWorker[]> {
  const key = fleetKeys(prefix).stopped;
  const all = Object.entries(await client.hgetall(key)).flatMap(([id, json]) => {
    try {
      return [JSON.parse(json) as StoppedWorker];
    } catch {
      return [{ worker_id: id, host: id.split(':')[0] ?? id, pid: 0, stopped: 0 }];
    }
  });
  const old = all.filter((w) => now - w.stopped > SEEN_KEEP_MS).map((w) => w.worker_id);
  if (old.length) await client.hdel(key, ...old).catch(() => undefined);
  return all.filter((w) => now - w.stopped <= SEEN_KEEP_MS).sort((a, b) => b.stopped - a.stopped);
}

/** Every worker seen in the last day: live ones idle or busy, the others lost. */
export async function readFleet(client: Redis, prefix: string, now: number = Date.now()): Promise<WorkerStatus[]> {
  const keys = fleetKeys(prefix);
  const seen = await client.hgetall(keys.seen);
  const ids = Object.keys(seen);
  const live = ids.length ? await client.mget(...ids.map((id) => keys.live(id))) : [];
  const out: WorkerStatus[] = [];
  const stale: string[] = [];
  ids.forEach((id, i) => {
    let beat: WorkerBeat;
    try {
      beat = JSON.parse(live[i] ?? seen[id] ?? '') as WorkerBeat;
    } catch {
      return;
    }
    const alive = live[i] !== null && live[i] !== undefined;
    if (!alive && now - beat.beat > SEEN_KEEP_MS) {
      stale.push(id);
      return;
    }
    const busy = beat.slots.some((s) => s.run_id !== null);
    out.push({
      ...beat,
      state: alive ? (busy ? 'busy' : 'idle') : 'lost',
      age_s: Math.max(0, (now - beat.beat) / 1000),
    });
  });
  if (stale.length) await client.hdel(keys.seen, ...stale).catch(() => undefined);
  out.sort((a, b) => a.host.localeCompare(b.host) || a.pid - b.pid);
  return out;
}

/**
 * Appends a run's loss to its bounded curve: a point whenever the update advanced by 1/LOSS_POINTS
 * of the run (and always the last one), so the list covers the whole run at a fixed size.
 */
export class LossCurveWriter {
  private last = new Map<string, number>();
  private readonly keys;

  constructor(
    private readonly client: Redis,
    prefix: string,
  ) {
    this.keys = fleetKeys(prefix);
  }

  record(runId: string, progress: RunProgress): void {
    if (progress.loss === null || (progress.phase !== 'training' && progress.phase !== 'pretraining')) return;
    if (progress.phase === 'pretraining') return;
    const total = progress.total ?? 0;
    const step = Math.max(1, Math.floor(total / LOSS_POINTS));
    const prev = this.last.get(runId);
    if (prev !== undefined && progress.update - prev < step && progress.update !== total) return;
    if (prev === progress.update) return;
    this.last.set(runId, progress.update);
    const key = this.keys.loss(runId);
    this.client
      .multi()
      .rpush(key, JSON.stringify([progress.update, Number(progress.loss.toPrecision(5))]))
      .ltrim(key, -2 * LOSS_POINTS, -1)
      .expire(key, LOSS_TTL_S)
      .exec()
      .catch(() => undefined);
  }

  forget(runId: string): void {
    this.last.delete(runId);
  }
}

/** Loss curves of the given runs: [update, loss] pairs in order, deduplicated by update. */
export async function readLossCurves(
  client: Redis,
  prefix: string,
  runIds: string[],
): Promise<Map<string, [number, number][]>> {
  const keys = fleetKeys(prefix);
  const out = new Map<string, [number, number][]>();
  if (runIds.length === 0) return out;
  const pipe = client.pipeline();
  for (const id of runIds) pipe.lrange(keys.loss(id), 0, -1);
  const results = (await pipe.exec()) ?? [];
  runIds.forEach((id, i) => {
    const [err, list] = results[i] ?? [null, []];
    if (err || !Array.isArray(list)) return;
    const byUpdate = new Map<number, number>();
    for (const item of list as string[]) {
      try {
        const [u, l] = JSON.parse(item) as [number, number];
        byUpdate.set(u, l);
      } catch {
        // skip a malformed point
      }
    }
    out.set(
      id,
      [...byUpdate.entries()].sort((a, b) => a[0] - b[0]),
    );
  });
  return out;
}

/** Rows/s per host over the runs active there now. */
export function throughputByHost(runs: { state: string; progress: RunProgress | null }[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const run of runs) {
    const p = run.progress;
    if (run.state !== 'active' || !p || p.rows_per_s === null) continue;
    out.set(p.host, (out.get(p.host) ?? 0) + p.rows_per_s);
  }
  return out;
}

import { progressOf, sequentialStatus } from '../queue/sequential-status.js';
import { readSequentialRecord } from '../contracts/index.js';
import { lookLine } from '../metrics/sequential.js';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Redis } from 'ioredis';
import { log } from '../log.js';
import { loadAudit } from '../report/index.js';
import { runFiles } from './run-files.js';
import {
  auditEta,
  baseWait,
  collectStatus,
  openQueues,
  openRedis,
  parseCellId,
  readFleet,
  readLossCurves,
  varyingCellAxes,
  type AuditStatus,
  type QueueConnection,
  type QueueHandles,
  type RunStatus,
  type WorkerStatus,
} from '../queue/index.js';

/**
 * The dashboard's one reader of Redis: a single poller per server, however many pages are open.
 * It polls only while at least one page listens, builds one snapshot per poll, and hands it to every
 * listener when it differs from the previous one (server-sent events fan it out).
 */
export interface RunView {
  run_id: string;
  cell_id: string;
  cell: Record<string, string>;
  state: string;
  update: number | null;
  total: number | null;
  loss: number | null;
  rows_per_s: number | null;
  eta_s: number | null;
  /** train / pretrain / eval base / eval final / starting / finishing / stopping, or "waiting for base, built by run X". */
  phase: string | null;
  eval: { phase: string; done: number; total: number } | null;
  attempt: number;
  max_attempts: number;
  host: string | null;
  gpu: string | null;
  failure: string | null;
  started: string | null;
  finished: string | null;
  loss_curve: [number, number][];
}

export interface AuditView {
  audit_id: string;
  name: string;
  state: string;
  submitted: string;
  cancelled_at: string | null;
  total: number;
  /** One accounting for every view: completed, failed (for good), cancelled, and the rest. */
  completed: number;
  failed: number;
  cancelled: number;
  active: number;
  waiting: number;
  eta_s: number | null;
  axes: string[];
  runs: RunView[];
  /** Where the view comes from: the queue, or the audit's files when the queue does not hold it. */
  source: 'queue' | 'disk';
  /** The audit folder, when known (from disk). */
  audit_dir: string | null;
  /** report.html of a finished audit, served at /api/audits/<id>/report; null when none. */
  report: string | null;
  /** Sequential replicates: `seed 5 of ≤10: 2 comparisons undecided`; absent for a fixed grid. */
  looks?: string;
  /** Sequential replicates, from the audit's sequential.json (disk views): one line per look read. */
  look_lines?: string[];
}

export interface HostView {
  host: string;
  workers: number;
  busy: number;
  idle: number;
  lost: number;
  gpus: number;
  rows_per_s: number;
  runs_active: number;
}

export interface Snapshot {
  time: string;
  actions: boolean;
  audits: AuditView[];
  workers: WorkerStatus[];
  hosts: HostView[];
  /** live: read from Redis just now; unreachable: Redis did not answer (audits then come from disk). */
  queue: 'live' | 'unreachable';
  error: string | null;
}

const WAITING = new Set(['waiting', 'prioritized', 'delayed', 'paused', 'waiting-children']);

export function phaseLabel(run: RunStatus): string | null {
  const p = run.progress;
  if (!p || run.state !== 'active') return null;
  const wait = baseWait(run);
  if (wait) return wait.text;
  if (p.phase === 'evaluating') return p.eval ? `eval ${p.eval.phase}` : 'eval';
  if (p.phase === 'training') return 'train';
  if (p.phase === 'pretraining') return 'pretrain';
  return p.phase;
}

/** `peers`: the runs in view, where a run waiting for its base finds the builder's pretraining ETA. */
export function runView(run: RunStatus, curve: [number, number][], peers: readonly RunStatus[] = []): RunView {
  const p = run.progress;
  const wait = run.state === 'active' ? baseWait(run, peers) : null;
  return {
    run_id: run.run_id,
    cell_id: run.cell_id,
    cell: parseCellId(run.cell_id),
    state: run.state,
    update: p ? p.update : null,
    total: p ? p.total : null,
    loss: p ? p.loss : null,
    rows_per_s: p && run.state === 'active' ? p.rows_per_s : null,
    // A run waiting for its base: the base's time left (its own work has not started).
    eta_s: wait ? wait.eta_s : p && run.state === 'active' ? p.eta_s : null,
    phase: phaseLabel(run),
    eval: p && run.state === 'active' ? p.eval : null,
    attempt: run.state === 'active' ? run.attempts_made + 1 : run.attempts_made,
    max_attempts: run.max_attempts,
    host: p ? p.host : null,
    gpu: p ? (p.gpu === null ? 'cpu' : p.gpu) : null,
    failure: run.state === 'failed' || run.state === 'delayed' || run.state === 'cancelled' ? run.failure : null,
    started: run.started,
    finished: run.finished,
    loss_curve: curve,
  };
}

export function auditView(
  audit: AuditStatus,
  curves: Map<string, [number, number][]>,
  slots?: number,
  peers: readonly RunStatus[] = audit.runs,
): AuditView {
  const count = (pred: (r: RunStatus) => boolean) => audit.runs.filter(pred).length;
  return {
    audit_id: audit.audit_id,
    name: audit.name,
    state: audit.state,
    submitted: audit.submitted,
    cancelled_at: audit.cancelled_at,
    total: audit.runs.length,
    completed: count((r) => r.state === 'completed'),
    failed: count((r) => r.state === 'failed'),
    cancelled: count((r) => r.state === 'cancelled'),
    active: count((r) => r.state === 'active'),
    waiting: count((r) => WAITING.has(r.state)),
    eta_s: audit.state === 'running' || audit.state === 'queued' ? auditEta(audit, Date.now(), slots) : null,
    axes: varyingCellAxes(audit.runs.map((r) => r.cell_id)),
    runs: audit.runs.map((r) => runView(r, curves.get(r.run_id) ?? [], peers)),
    source: 'queue',
    audit_dir: null,
    report: null,
    ...(audit.sequential ? { looks: sequentialStatus(audit.sequential) } : {}),
  };
}

/**
 * An audit read from its folder (audit.json, each run's result.json or failure.json): for an audit
 * the queue does not hold, or when Redis is gone (`canary-audit run` stops its private one at the
 * end). Finished when every run has a result or a failure; otherwise stopped, its other runs
 * "not run". With sequential replicates (sequential.json) the audit is the runs its looks took, as
 * the queue lists them, and it is finished once the looks are done; where the looks stand reads as
 * it does live (`seed 3 of ≤6: 1 comparison undecided`), with a line per look read.
 */
export async function diskAuditView(auditDir: string): Promise<AuditView> {
  const audit = await loadAudit(auditDir);
  const record = await readSequentialRecord(audit.dir);
  const runs: RunView[] = [];
  // With sequential replicates loadAudit holds the runs the looks took only, as the queue does.
  for (const r of audit.runs) {
    // Loss, curve, rows/s and attempts from the run's own files (dashboard/run-files.ts).
    const files = await runFiles(r.outputDir);
    const attempts = Math.max(r.failure?.attempts ?? 0, files.attempts);
    runs.push({
      run_id: r.run_id,
      cell_id: r.cell_id,
      cell: parseCellId(r.cell_id),
      state: r.status === 'finished' ? 'completed' : r.status === 'failed' ? 'failed' : 'not run',
      update: files.update,
      total: r.status === 'finished' ? files.update : null,
      loss: files.loss,
      rows_per_s: files.rows_per_s,
      eta_s: null,
      phase: null,
      eval: null,
      attempt: attempts,
      max_attempts: attempts,
      host: files.host,
      gpu: files.gpu,
      failure: r.failure ? `${r.failure.kind}: ${r.failure.message}` : null,
      started: files.started,
      finished: r.status === 'finished' ? files.finished : null,
      loss_curve: files.loss_curve,
    });
  }
  const count = (state: string) => runs.filter((r) => r.state === state).length;
  const missing = count('not run');
  const report = join(audit.dir, 'report', 'report.html');
  let decided = 0;
  const lookLines = (record?.looks ?? []).map((l) => {
    decided += l.stopped.filter((c) =>
      record?.stopped.some((s) => s.comparison === c && s.reason === 'decided'),
    ).length;
    return lookLine(l, record?.max ?? l.seeds, decided);
  });
  return {
    audit_id: audit.id,
    name: audit.name,
    state: missing === 0 && (!record || record.done) ? 'finished' : 'stopped',
    submitted: '',
    cancelled_at: null,
    total: runs.length,
    completed: count('completed'),
    failed: count('failed'),
    cancelled: 0,
    active: 0,
    waiting: missing,
    eta_s: null,
    axes: varyingCellAxes(runs.map((r) => r.cell_id)),
    runs,
    source: 'disk',
    audit_dir: audit.dir,
    report: existsSync(report) ? report : null,
    ...(record ? { looks: sequentialStatus(progressOf(record, null)), look_lines: lookLines } : {}),
  };
}

export function hostViews(workers: WorkerStatus[], audits: AuditStatus[]): HostView[] {
  const hosts = new Map<string, HostView>();
  for (const w of workers) {
    const h = hosts.get(w.host) ?? {
      host: w.host,
      workers: 0,
      busy: 0,
      idle: 0,
      lost: 0,
      gpus: 0,
      rows_per_s: 0,
      runs_active: 0,
    };
    h.workers += 1;
    h[w.state] += 1;
    h.gpus += w.gpus.length;
    hosts.set(w.host, h);
  }
  for (const audit of audits) {
    for (const run of audit.runs) {
      const p = run.progress;
      if (run.state !== 'active' || !p) continue;
      const h = hosts.get(p.host) ?? {
        host: p.host,
        workers: 0,
        busy: 0,
        idle: 0,
        lost: 0,
        gpus: 0,
        rows_per_s: 0,
        runs_active: 0,
      };
      h.runs_active += 1;
      h.rows_per_s += p.rows_per_s ?? 0;
      hosts.set(p.host, h);
    }
  }
  return [...hosts.values()].sort((a, b) => a.host.localeCompare(b.host));
}

export class StatusSource {
  private readonly queues: QueueHandles;
  private readonly client: Redis;
  private readonly listeners = new Set<(s: Snapshot) => void>();
  private timer: NodeJS.Timeout | null = null;
  private latest: Snapshot | null = null;
  private latestKey = '';
  private polling: Promise<Snapshot> | null = null;
  /** Loss curves of runs no longer active: read once, kept. */
  private readonly settledCurves = new Map<string, [number, number][]>();
  /** Polls made (tests check that pages share them). */
  polls = 0;

  constructor(
    readonly conn: QueueConnection,
    private readonly options: {
      intervalMs: number;
      actions: boolean;
      artifactsDir?: string | null;
      auditDirs?: string[];
      privateRedisOf?: string | null;
    },
  ) {
    this.queues = openQueues(conn);
    this.client = openRedis(conn);
  }

  get redis(): Redis {
    return this.client;
  }

  get handles(): QueueHandles {
    return this.queues;
  }

  /** Listen to snapshots; the first listener starts the poller, the last one leaving stops it. */
  subscribe(listener: (s: Snapshot) => void): () => void {
    this.listeners.add(listener);
    if (this.latest) listener(this.latest);
    if (!this.timer) {
      void this.poll();
      this.timer = setInterval(() => void this.poll(), this.options.intervalMs);
    }
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    };
  }

  /** The newest snapshot, polling once when none is recent. */
  async current(): Promise<Snapshot> {
    if (this.latest && Date.now() - Date.parse(this.latest.time) < this.options.intervalMs) return this.latest;
    return this.poll();
  }

  /** One poll at a time: a slow Redis never stacks reads. */
  poll(): Promise<Snapshot> {
    this.polling ??= this.read().finally(() => {
      this.polling = null;
    });
    return this.polling;
  }

  private async read(): Promise<Snapshot> {
    this.polls += 1;
    let snapshot: Snapshot;
    try {
      // BullMQ's connections queue commands while Redis is down instead of failing them: a poll
      // that does not answer in time (or a client still reconnecting after a failed one) is read
      // as an unreachable queue, never waited on.
      if (this.latest?.queue === 'unreachable' && this.client.status !== 'ready')
        throw new Error(`Redis client ${this.client.status}`);
      const [audits, workers] = await withTimeout(
        Promise.all([
          collectStatus(this.conn, undefined, { queues: this.queues, client: this.client }),
          readFleet(this.client, this.conn.prefix),
        ]),
        Math.max(3_000, 2 * this.options.intervalMs),
      );
      const curves = await this.curves(audits);
      const liveSlots = workers.filter((w) => w.state !== 'lost').reduce((n, w) => n + w.slots.length, 0);
      const peers = audits.flatMap((a) => a.runs);
      const views = audits.map((a) => auditView(a, curves, liveSlots > 0 ? liveSlots : undefined, peers));
      // An audit named on the command line, or under the artifact root, that this Redis does not
      // hold is shown from its files (a finished `canary-audit run` on its own private Redis).
      const queued = new Set(views.map((v) => v.audit_id));
      const fromDisk = (
        await this.cachedDiskViews(this.diskAuditDirs().filter((d) => !queued.has(basename(d))))
      ).filter((v) => !queued.has(v.audit_id));
      snapshot = {
        time: new Date().toISOString(),
        actions: this.options.actions,
        audits: [...views, ...fromDisk],
        workers,
        hosts: hostViews(workers, audits),
        queue: 'live',
        error: null,
      };
    } catch (error) {
      log.debug({ err: error }, 'dashboard poll failed');
      // No queue to read: every audit known (named, seen before, or under the artifact root) is
      // shown as its files say, never as the last live snapshot said.
      const audits = await this.diskViews(this.knownAuditDirs());
      snapshot = {
        time: new Date().toISOString(),
        actions: this.options.actions,
        audits,
        workers: [],
        hosts: [],
        queue: 'unreachable',
        error: this.options.privateRedisOf
          ? `queue unreachable: the private Redis \`canary-audit run\` started for ${this.options.privateRedisOf} is not running (run stops it when the audit ends); audits are shown from their files on disk`
          : `queue unreachable: Redis at ${this.conn.redacted} does not answer; audits are shown from their files on disk (check that it is running, and the URL, password and TLS given with --redis or REDIS_URL)`,
      };
    }
    const key = JSON.stringify({
      ...snapshot,
      time: '',
      workers: snapshot.workers.map((w) => ({ ...w, beat: 0, age_s: Math.round(w.age_s / 5) })),
    });
    this.latest = snapshot;
    if (key !== this.latestKey) {
      this.latestKey = key;
      for (const listener of this.listeners) listener(snapshot);
    }
    return snapshot;
  }

  /** The folders of the audits to show from disk when the queue cannot be read. */
  private knownAuditDirs(): string[] {
    const dirs = new Set((this.options.auditDirs ?? []).map((d) => resolve(d)));
    const root = this.options.artifactsDir ? join(this.options.artifactsDir, 'audits') : null;
    if (root && existsSync(root)) {
      const seen = this.latest?.audits.map((a) => a.audit_id) ?? [];
      const ids = seen.length > 0 && this.latest?.queue === 'live' ? seen : readdirSync(root);
      for (const id of ids) if (existsSync(join(root, id, 'audit.json'))) dirs.add(join(root, id));
    }
    for (const a of this.latest?.audits ?? []) if (a.audit_dir) dirs.add(a.audit_dir);
    return [...dirs];
  }

  /** Named audit folders and every audit folder under the artifact root. */
  private diskAuditDirs(): string[] {
    const dirs = new Set((this.options.auditDirs ?? []).map((d) => resolve(d)));
    const root = this.options.artifactsDir ? join(this.options.artifactsDir, 'audits') : null;
    if (root && existsSync(root))
      for (const id of readdirSync(root)) if (existsSync(join(root, id, 'audit.json'))) dirs.add(join(root, id));
    return [...dirs];
  }

  /**
   * Disk views beside a live queue, re-read when their folder changes: a finished audit when its
   * audit.json or report changes, a stopped one (perhaps running on another Redis) every 10 s.
   */
  private readonly diskCache = new Map<string, { key: string; at: number; view: AuditView }>();

  private async cachedDiskViews(dirs: string[]): Promise<AuditView[]> {
    const views: AuditView[] = [];
    for (const dir of dirs) {
      let key: string;
      try {
        key = `${statSync(join(dir, 'audit.json')).mtimeMs}:${existsSync(join(dir, 'report', 'report.html'))}`;
      } catch {
        continue;
      }
      const hit = this.diskCache.get(dir);
      if (hit && hit.key === key && (hit.view.state === 'finished' || Date.now() - hit.at < 10_000)) {
        views.push(hit.view);
        continue;
      }
      const [view] = await this.diskViews([dir]);
      if (!view) continue;
      this.diskCache.set(dir, { key, at: Date.now(), view });
      views.push(view);
    }
    return views;
  }

  private async diskViews(dirs: string[]): Promise<AuditView[]> {
    const views: AuditView[] = [];
    for (const dir of dirs) {
      try {
        views.push(await diskAuditView(dir));
      } catch (error) {
        log.debug({ err: error, dir }, 'audit folder not readable');
      }
    }
    return views;
  }

  /** The folder of an audit shown from disk, for the plot and report routes. */
  diskAuditDir(auditId: string): string | null {
    return this.latest?.audits.find((a) => a.audit_id === auditId && a.audit_dir)?.audit_dir ?? null;
  }

  private async curves(audits: AuditStatus[]): Promise<Map<string, [number, number][]>> {
    const runs = audits.flatMap((a) => a.runs);
    const active = runs.filter((r) => r.state === 'active').map((r) => r.run_id);
    const settledNew = runs
      .filter((r) => r.state !== 'active' && r.state !== 'waiting' && !this.settledCurves.has(r.run_id))
      .map((r) => r.run_id);
    const read = await readLossCurves(this.client, this.conn.prefix, [...active, ...settledNew]);
    for (const id of settledNew) this.settledCurves.set(id, read.get(id) ?? []);
    // A retried run becomes active again: its settled curve is re-read from then on.
    for (const id of active) this.settledCurves.delete(id);
    const out = new Map(this.settledCurves);
    for (const id of active) out.set(id, read.get(id) ?? []);
    return out;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.listeners.clear();
    await withTimeout<unknown>(this.polling ?? Promise.resolve(), 5_000).catch(() => undefined);
    this.client.disconnect();
    // A clean close waits for Redis; when Redis is gone, drop the connections instead.
    // BullMQ's disconnect waits for an answer too: bounded as well, so close never hangs.
    await withTimeout(this.queues.close(), 2_000).catch(() =>
      withTimeout(Promise.all([this.queues.runs.disconnect(), this.queues.audits.disconnect()]), 1_000).catch(
        () => undefined,
      ),
    );
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

import type { RunPhase, RunProgress } from './job-data.js';
import type { AuditStatus, RunStatus } from './status.js';

/**
 * The whole audit's ETA, from what Redis holds. A run's time splits into its own work (start-up,
 * fine-tuning, evaluation) and the shared tiny base (pretrained by one run while runs needing the
 * same base wait for it); the two are estimated apart, because mixing them was what made the old
 * estimate wrong: the first runs' elapsed time, pretraining included, was charged to every run.
 *
 * - Own work per run, `own_s`: the median of the finished runs' own seconds (their wall time minus
 *   the time they waited for or built a base). Before any run finished: the median over runs
 *   fine-tuning now of own seconds so far + fine-tuning left at their measured rate + the longest
 *   evaluation measured so far (the final evaluation scores the same probes as the base one), or,
 *   for a run in its final evaluation, own seconds so far + that evaluation's ETA.
 * - An active run needs the larger of its current phase's ETA and `own_s` minus its own seconds so
 *   far; one waiting for a base needs the base's pretraining ETA first (0 when no run of the audit
 *   is pretraining it any more), one pretraining its own pretraining ETA first.
 * - A queued run needs `own_s`, plus the mean base build time times the share of started runs, the
 *   first one aside, that built a base: one base shared by the audit costs queued runs nothing, and
 *   an audit whose runs need bases of their own (one per seed, say) shows it in further builds.
 * - Runs go to the `slots` workers (default: the active runs) in order, each queued run to the
 *   first slot to free up; the ETA is when the last slot finishes.
 *
 * Null while something needed is not measured yet (no fine-tuning rate, no finished run); 0 once
 * nothing is left. Pure: `now` is the only clock.
 */
export function auditEta(audit: AuditStatus, now: number = Date.now(), slots?: number): number | null {
  return estimateAudit(audit, now, slots).eta_s;
}

export interface AuditEstimate {
  eta_s: number | null;
  /** Seconds each active run still needs (null: not known yet). */
  runs: Map<string, number | null>;
  /** The per-run own work the estimate used, and where it came from. */
  own_s: number | null;
  own_from: 'finished' | 'active' | null;
}

const QUEUED = new Set(['waiting', 'delayed']);
/** Phases that are not this run's own work: a shared base's pretraining, or waiting for it. */
const BASE_PHASES: readonly RunPhase[] = ['waiting_base', 'pretraining'];

export function estimateAudit(audit: AuditStatus, now: number = Date.now(), slots?: number): AuditEstimate {
  const active = audit.runs.filter((r) => r.state === 'active');
  const queued = audit.runs.filter((r) => QUEUED.has(r.state)).length;
  const runs = new Map<string, number | null>();
  if (active.length === 0 && queued === 0) {
    return {
      eta_s: audit.state === 'finished' || audit.state === 'cancelled' ? 0 : null,
      runs,
      own_s: null,
      own_from: null,
    };
  }
  const finished = audit.runs.filter((r) => r.state === 'completed' && r.started && r.finished);
  let own = median(finished.map((r) => finishedOwn(r)).filter((s): s is number => s !== null && s > 0));
  let ownFrom: AuditEstimate['own_from'] = own !== null ? 'finished' : null;
  if (own === null) {
    const evalAfter = Math.max(
      0,
      ...audit.runs.map((r) => spent(r.progress, now, r.state === 'active').evaluating ?? 0),
    );
    // Runs fine-tuning (their final evaluation still to come) or in their final evaluation.
    own = median(
      active
        .filter(
          (r) =>
            (r.progress?.phase === 'training' ||
              (r.progress?.phase === 'evaluating' && r.progress.eval?.phase === 'final')) &&
            phaseLeft(r.progress, now) !== null,
        )
        .map(
          (r) =>
            ownSoFar(r, now) +
            (phaseLeft(r.progress as RunProgress, now) as number) +
            (r.progress?.phase === 'training' ? evalAfter : 0),
        ),
    );
    if (own !== null) ownFrom = 'active';
  }

  // The shared base: the longest pretraining under way, and what a queued run may still have to build.
  const builders = active.filter((r) => r.progress?.phase === 'pretraining');
  const started = audit.runs.filter((r) => r.progress && (r.state === 'active' || r.state === 'completed'));
  const built = started.map((r) => spent(r.progress, now, r.state === 'active').pretraining ?? 0).filter((s) => s > 0);
  // The first build is the audit's shared base; only further builds say that runs need bases of their own.
  const buildShare = started.length > 1 ? Math.max(0, built.length - 1) / (started.length - 1) : 0;
  const buildMean = built.length ? built.reduce((a, b) => a + b, 0) / built.length : 0;

  for (const run of active) runs.set(run.run_id, activeLeft(run, now, own, builders));
  const left = [...runs.values()];
  if (left.some((x) => x === null) || (queued > 0 && own === null))
    return { eta_s: null, runs, own_s: own, own_from: ownFrom };

  // Each active run holds a slot until it is done; queued runs take the first slot that frees up.
  const free = (left as number[]).slice();
  const parallel = Math.max(1, slots ?? active.length);
  while (free.length < parallel) free.push(0);
  free.sort((a, b) => a - b);
  const perQueued = (own as number) + buildShare * buildMean;
  for (let i = 0; i < queued; i += 1) {
    const at = free.shift() as number;
    insertSorted(free, at + perQueued);
  }
  return { eta_s: Math.max(0, ...free), runs, own_s: own, own_from: ownFrom };
}

/** Seconds an active run still needs, or null when not known yet. */
function activeLeft(run: RunStatus, now: number, own: number | null, builders: RunStatus[]): number | null {
  const p = run.progress;
  if (p?.phase === 'finishing') return 0;
  if (own === null) return null;
  if (!p) return own;
  if (p.phase === 'waiting_base') {
    // No builder pretraining in this audit: it has just finished (or is out of view): the base is taken as ready.
    const builder = builders.find((b) => b.run_id === p.waiting?.run_id) ?? builders[0];
    const baseLeft = builder ? phaseLeft(builder.progress as RunProgress, now) : 0;
    return baseLeft !== null ? baseLeft + own : null;
  }
  const left = phaseLeft(p, now);
  if (p.phase === 'pretraining') return left !== null ? left + own : null;
  return Math.max(left ?? 0, own - ownSoFar(run, now));
}

/** The tracker's ETA of the current phase, less the time since it was written; null when not measured. */
function phaseLeft(p: RunProgress, now: number): number | null {
  if (p.eta_s === null || !Number.isFinite(p.eta_s)) return null;
  return Math.max(0, p.eta_s - Math.max(0, now - p.updated) / 1000);
}

/** Seconds of the run's own work so far (its phases other than the base's), up to `now` when active. */
function ownSoFar(run: RunStatus, now: number): number {
  const s = spent(run.progress, now, run.state === 'active');
  return Object.entries(s).reduce(
    (sum, [phase, secs]) => (BASE_PHASES.includes(phase as RunPhase) ? sum : sum + (secs ?? 0)),
    0,
  );
}

/** A finished run's own seconds: its wall time less the time it waited for or built a base. */
function finishedOwn(run: RunStatus): number | null {
  const wall = (Date.parse(run.finished as string) - Date.parse(run.started as string)) / 1000;
  if (!Number.isFinite(wall)) return null;
  const s = run.progress?.phase_s ?? {};
  return wall - (s.waiting_base ?? 0) - (s.pretraining ?? 0);
}

/** phase_s, with the time since the last write charged to the current phase of an active run. */
function spent(p: RunProgress | null, now: number, live: boolean): Partial<Record<RunPhase, number>> {
  const s: Partial<Record<RunPhase, number>> = { ...(p?.phase_s ?? {}) };
  if (p && live && now > p.updated) s[p.phase] = (s[p.phase] ?? 0) + (now - p.updated) / 1000;
  return s;
}

function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = xs.slice().sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

function insertSorted(xs: number[], x: number): void {
  let i = 0;
  while (i < xs.length && (xs[i] as number) <= x) i += 1;
  xs.splice(i, 0, x);
}

import type { AuditStatus, RunStatus } from './status.js';

/**
 * The whole audit's ETA from what Redis holds: the mean wall time of finished runs (or, before any
 * finished, the active runs' elapsed + remaining time) times the runs still waiting, spread over the
 * runs working now (or `slots`, the live worker slots, when known), plus what the active runs have
 * left. Null when nothing is known yet (no run ever started).
 */
export function auditEta(audit: AuditStatus, now: number = Date.now(), slots?: number): number | null {
  const done = audit.runs.filter((r) => r.state === 'completed' && r.started && r.finished);
  const active = audit.runs.filter((r) => r.state === 'active');
  const waiting = audit.runs.filter((r) => ['waiting', 'prioritized', 'delayed', 'paused', 'waiting-children'].includes(r.state)).length;
  if (active.length === 0 && waiting === 0) return audit.state === 'finished' || audit.state === 'cancelled' ? 0 : null;
  const durations = done.map((r) => (Date.parse(r.finished as string) - Date.parse(r.started as string)) / 1000).filter((d) => d > 0);
  const remaining = active.map((r) => activeRemaining(r, now));
  let perRun: number | null = durations.length ? durations.reduce((a, b) => a + b, 0) / durations.length : null;
  if (perRun === null) {
    const estimates = active
      .map((r, i) => (r.started && remaining[i] !== null ? (now - Date.parse(r.started)) / 1000 + (remaining[i] as number) : null))
      .filter((x): x is number => x !== null);
    if (estimates.length) perRun = estimates.reduce((a, b) => a + b, 0) / estimates.length;
  }
  const known = remaining.map((r) => r ?? perRun);
  if (known.some((r) => r === null) || (waiting > 0 && perRun === null)) return null;
  const activeLeft = known as number[];
  const parallel = Math.max(1, slots ?? active.length);
  const longest = activeLeft.length ? Math.max(...activeLeft) : 0;
  const total = (activeLeft.reduce((a, b) => a + b, 0) + waiting * (perRun ?? 0)) / parallel;
  return Math.max(longest, total);
}

/** Seconds an active run still needs: its own ETA, else null. */
function activeRemaining(run: RunStatus, _now: number): number | null {
  const p = run.progress;
  if (!p) return null;
  if (p.eta_s !== null && Number.isFinite(p.eta_s)) return p.eta_s;
  return null;
}

import { auditEta } from '../../queue/audit-eta.js';
import { baseWait } from '../../queue/base-wait.js';
import { cellColumns } from '../../queue/cell-columns.js';
import type { AuditStatus, RunState, RunStatus } from '../../queue/status.js';
import { DEFAULT_TUNING } from '../../queue/tuning.js';
import { sequentialStatus } from '../../queue/sequential-status.js';

export { sequentialStatus };

/**
 * Text views of a status snapshot. Pure functions of the snapshot (and a width), so they are tested
 * without Redis. `plain` is for logs and pipes (one line per run, stable columns); `bars` is for a
 * terminal (a progress bar per run).
 */
export function formatDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return '-';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h < 48) return `${h}h${String(m).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, '0')}h`;
}

export function progressBar(fraction: number, width: number): string {
  const f = Math.min(1, Math.max(0, Number.isFinite(fraction) ? fraction : 0));
  const full = Math.round(f * width);
  return `[${'#'.repeat(full)}${'-'.repeat(width - full)}]`;
}

const ORDER: RunState[] = ['active', 'waiting', 'delayed', 'completed', 'failed', 'cancelled', 'unknown'];

/** `slots`: the worker slots running this audit, when known (else the active runs count as them). */
export function auditHeadline(audit: AuditStatus, slots?: number): string {
  const counts = ORDER.filter((s) => (audit.counts[s] ?? 0) > 0).map((s) => `${audit.counts[s]} ${s}`);
  const total = audit.runs.length;
  const cancelled = audit.cancelled_at ? ` (cancelled ${audit.cancelled_at})` : '';
  const eta = audit.state === 'running' || audit.state === 'queued' ? auditEta(audit, Date.now(), slots) : null;
  const etaText = eta !== null && eta > 0 ? `  audit ETA ${formatDuration(eta)}` : '';
  const looks = audit.sequential ? `  ${sequentialStatus(audit.sequential)}` : '';
  return `${audit.audit_id}  ${audit.name}  ${audit.state}${cancelled}  ${total} run${total === 1 ? '' : 's'}: ${counts.join(', ') || 'none'}${looks}${etaText}`;
}

function where(run: RunStatus): string {
  const p = run.progress;
  if (!p) return '';
  return `${p.host} ${p.gpu === null ? 'cpu' : `gpu${p.gpu}`}`;
}

/** BullMQ counts an attempt when it ends (completed or failed): an active run is one further. */
function attemptText(run: RunStatus): string | null {
  const n = run.state === 'active' ? run.attempts_made + 1 : run.attempts_made;
  return n > 0 ? `attempt ${n}/${run.max_attempts}` : null;
}

/** Cut a line to the terminal width, keeping its column spacing. */
function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function shorten(text: string, max: number): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > max ? `${one.slice(0, max - 1)}…` : one;
}

/**
 * The figures of one run after its state: progress while active, reason when failed. `peers` (the
 * other runs in view) let a run waiting for its base show the builder's pretraining ETA.
 */
export function runDetail(run: RunStatus, now = Date.now(), peers: readonly RunStatus[] = []): string {
  const p = run.progress;
  const parts: string[] = [];
  if (run.state === 'active' && run.worker_alive === false) {
    const age = p ? Math.max(0, Math.round((now - p.updated) / 1000)) : null;
    if (age !== null && age * 1000 < DEFAULT_TUNING.lockMs) {
      // No lock, yet its worker wrote progress within one lock period: the worker is alive; Redis
      // lost the lock or the run's completion (an outage, a failover), not the worker.
      parts.push(
        `its worker is alive (last heartbeat ${formatDuration(age)} ago) but Redis holds no lock for the run (lost in a Redis outage?); the stalled-job check requeues it, and a finished run's result.json is reused, not trained again`,
      );
    } else {
      const heartbeat = age !== null ? `; last heartbeat ${formatDuration(age)} ago` : '';
      parts.push(`no live worker (its lock expired${heartbeat}); a live worker takes the run over`);
    }
  }
  const wait = run.state === 'active' ? baseWait(run, peers) : null;
  if (wait && p) {
    parts.push(
      wait.text,
      `waited ${formatDuration(Math.max(0, (now - (p.waiting?.since ?? now)) / 1000))}`,
      `base ETA ${formatDuration(wait.eta_s)}`,
    );
  } else if (run.state === 'active' && p) {
    if (p.phase === 'evaluating' && p.eval) parts.push(`eval ${p.eval.phase} ${p.eval.done}/${p.eval.total}`);
    else if (p.phase === 'pretraining') parts.push(`pretrain ${p.update}/${p.total ?? '?'}`);
    else parts.push(`${p.update}/${p.total ?? '?'}`);
    if (p.loss !== null) parts.push(`loss ${p.loss.toFixed(3)}`);
    if (p.rows_per_s !== null) parts.push(`${p.rows_per_s.toFixed(1)} rows/s`);
    // While the base pretrains, the ETA covers pretraining only: fine-tuning's rate is not known yet.
    parts.push(`${p.phase === 'pretraining' ? 'pretrain ETA' : 'ETA'} ${formatDuration(p.eta_s)}`);
    if (p.phase === 'stopping') parts.push('stopping');
  }
  const host = where(run);
  if (host && (run.state === 'active' || run.state === 'completed' || run.state === 'failed')) parts.push(host);
  const attempts = run.state === 'cancelled' ? null : attemptText(run);
  if (attempts) parts.push(attempts);
  if (run.failure && (run.state === 'failed' || run.state === 'delayed' || run.state === 'cancelled'))
    parts.push(shorten(run.failure, 100));
  return parts.join('  ');
}

export function renderPlain(audits: AuditStatus[], slots?: number): string {
  if (audits.length === 0) return 'no audits in the queue\n';
  const lines: string[] = [];
  const peers = audits.flatMap((a) => a.runs);
  for (const audit of audits) {
    lines.push(auditHeadline(audit, slots));
    // The cell id is what tells runs apart: printed in full, never shortened.
    const cellWidth = Math.max(4, ...audit.runs.map((r) => r.cell_id.length));
    for (const run of audit.runs) {
      lines.push(
        `  ${run.run_id}  ${run.cell_id.padEnd(cellWidth)}  ${run.state.padEnd(9)}  ${runDetail(run, Date.now(), peers)}`.trimEnd(),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

/** Terminal view: a bar per run (training progress; full when completed). */
export function renderBars(audits: AuditStatus[], columns = 100, slots?: number): string {
  if (audits.length === 0) return 'no audits in the queue\n';
  // A pseudo-terminal may report 0 columns: fall back to a common width.
  const width = columns > 0 ? columns : 100;
  const barWidth = Math.max(10, Math.min(20, width - 110));
  const lines: string[] = [];
  const peers = audits.flatMap((a) => a.runs);
  for (const audit of audits) {
    const done = (audit.counts.completed ?? 0) + (audit.counts.failed ?? 0) + (audit.counts.cancelled ?? 0);
    // Every line fits the width: a wrapped line would throw off the in-place redraw.
    lines.push(
      clip(
        `${progressBar(audit.runs.length ? done / audit.runs.length : 1, barWidth)} ${auditHeadline(audit, slots)}`,
        Math.max(40, width - 1),
      ),
    );
    // The varying axes as columns, in full, before anything a narrow terminal may clip.
    const columns = cellColumns(audit.runs.map((r) => r.cell_id));
    lines.push(
      clip(
        `  ${' '.repeat(barWidth + 2)} ${'run'.padEnd(12)} ${columns.header} ${'state'.padEnd(9)}`.trimEnd(),
        Math.max(40, width - 1),
      ),
    );
    for (const run of audit.runs) {
      const p = run.progress;
      let fraction = 0;
      if (run.state === 'completed') fraction = 1;
      else if (p?.total) fraction = p.update / p.total;
      const line = `  ${progressBar(fraction, barWidth)} ${run.run_id.slice(0, 12)} ${columns.row(run.cell_id)} ${run.state.padEnd(9)} ${runDetail(run, Date.now(), peers)}`;
      lines.push(clip(line, Math.max(40, width - 1)));
    }
  }
  return `${lines.join('\n')}\n`;
}

/**
 * For `status --watch` without a terminal: one line per run whose state or progress changed since
 * the previous snapshot, so a log shows each transition once.
 */
export function renderChanges(
  previous: AuditStatus[] | null,
  current: AuditStatus[],
  now: Date = new Date(),
  slots?: number,
): string {
  const before = new Map<string, string>();
  // Keyed at the run's own last heartbeat, so a growing "ago" alone is not a change.
  const key = (run: RunStatus) => `${run.state}|${runDetail(run, run.progress?.updated ?? 0)}`;
  for (const audit of previous ?? []) for (const run of audit.runs) before.set(run.run_id, key(run));
  const stamp = now.toISOString().slice(11, 19);
  const lines: string[] = [];
  const peers = current.flatMap((a) => a.runs);
  for (const audit of current) {
    const prevAudit = previous?.find((a) => a.audit_id === audit.audit_id);
    if (!prevAudit || prevAudit.state !== audit.state) lines.push(`${stamp} ${auditHeadline(audit, slots)}`);
    for (const run of audit.runs) {
      if (before.get(run.run_id) !== key(run))
        lines.push(
          `${stamp}   ${run.run_id}  ${run.cell_id}  ${run.state.padEnd(9)}  ${runDetail(run, now.getTime(), peers)}`.trimEnd(),
        );
    }
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

import type { AuditReturn } from './job-data.js';

/**
 * The audit parent's summary over every look of sequential replicates. A later look's parent holds
 * only that look's runs as children (src/queue/extend-audit.ts), so its own reading of them covers
 * that look alone; the summary the previous look's parent returned travels in the new parent's data
 * (`earlier`) and is merged here, so `status`, the dashboard and the worker's log count every run
 * the audit took. A run appears once: a later reading of the same run wins (it cannot be queued
 * twice, but a completed run stays completed even if an earlier look saw it cancelled).
 */
export function mergeAuditReturns(earlier: AuditReturn | undefined, now: AuditReturn): AuditReturn {
  if (!earlier) return now;
  const seenNow = new Set([...now.completed, ...now.failed.map((f) => f.run_id), ...now.cancelled]);
  const keep = (id: string): boolean => !seenNow.has(id);
  return {
    audit_id: now.audit_id,
    completed: [...earlier.completed.filter(keep), ...now.completed].sort(),
    failed: [...earlier.failed.filter((f) => keep(f.run_id)), ...now.failed].sort((a, b) =>
      a.run_id.localeCompare(b.run_id),
    ),
    cancelled: [...new Set([...earlier.cancelled.filter(keep), ...now.cancelled])].sort(),
    finished: now.finished,
  };
}

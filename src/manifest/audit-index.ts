import { AUDIT_VERSION, type AuditIndex, type AuditRunEntry } from '../contracts/index.js';
import { finishProvenance } from '../provenance/index.js';
import { AXES } from '../grid/index.js';
import type { AuditPlan } from './plan.js';

/** The audit.json of a planned audit whose runs were written (`created` kept from an earlier write). */
export function auditIndex(plan: AuditPlan, runs: AuditRunEntry[], created?: string): AuditIndex {
  const axes: Record<string, (string | number)[]> = {};
  for (const axis of AXES) {
    const labels = new Set<string | number>();
    for (const run of plan.runs) {
      const label = run.cell.labels[axis];
      if (label !== null) labels.add(label);
    }
    // Grids that do not name the design axis keep their audit.json as before.
    if (axis === 'design' && !plan.grid.expansion.named.includes('design')) continue;
    axes[axis] = [...labels];
  }
  const { description } = plan.grid.doc;
  return {
    schema_version: AUDIT_VERSION,
    id: plan.auditId,
    name: plan.name,
    ...(description !== undefined ? { description } : {}),
    grid_file: plan.gridFile,
    grid_sha256: plan.grid.sha256,
    created: created ?? new Date().toISOString(),
    axes,
    runs,
    provenance: finishProvenance(plan.startStamp),
  };
}

import type { Provenance } from '../provenance/index.js';
import { finishProvenance } from '../provenance/index.js';
import { AXES } from '../grid/index.js';
import type { AuditPlan } from './plan.js';
import type { WrittenRun } from './write.js';

/** audit.json (schemas/audit.schema.json): the index of an audit's runs. */
export const AUDIT_VERSION = 'canary-audit.audit/1';

export interface AuditIndex {
  schema_version: typeof AUDIT_VERSION;
  id: string;
  name: string;
  description?: string;
  /** Absolute path of the grid file as submitted; grid.yaml beside audit.json is its copy. */
  grid_file: string;
  grid_sha256: string;
  created: string;
  /** Label of every value per axis, in grid order (dose and seed as numbers). */
  axes: Record<string, (string | number)[]>;
  runs: { run_id: string; cell_id: string; cell: Record<string, unknown>; dir: string }[];
  provenance: Provenance;
}

export function auditIndex(plan: AuditPlan, runs: WrittenRun[], created?: string): AuditIndex {
  const axes: Record<string, (string | number)[]> = {};
  for (const axis of AXES) {
    const labels = new Set<string | number>();
    for (const run of plan.runs) {
      const label = run.cell.labels[axis];
      if (label !== null) labels.add(label);
    }
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
    runs: runs.map((r) => ({ run_id: r.runId, cell_id: r.cellId, cell: r.cell, dir: `runs/${r.runId}` })),
    provenance: finishProvenance(plan.startStamp),
  };
}

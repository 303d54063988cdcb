import { resolve } from 'node:path';
import { pinPlanRevisions } from '../hub/index.js';
import { planAudit, writeAudit, type AuditPlan, type WrittenAudit } from '../manifest/index.js';

export interface PlanGridOptions {
  /** Write the audit under DIR/audits/<audit_id>/ (default: plan only). */
  out?: string;
  /** Resolve each hf model revision to a commit sha on the Hub before writing. */
  pinRevisions?: boolean;
}

/** `plan`: expand a grid, optionally pin its model revisions, optionally write the audit. */
export async function planGrid(gridPath: string, options: PlanGridOptions = {}): Promise<{ plan: AuditPlan; written?: WrittenAudit }> {
  const artifactsDir = options.out ? resolve(options.out) : undefined;
  let plan = await planAudit(gridPath, artifactsDir ? { artifactsDir } : {});
  if (options.pinRevisions) plan = await pinPlanRevisions(plan);
  if (!artifactsDir) return { plan };
  return { plan, written: await writeAudit(plan, artifactsDir) };
}

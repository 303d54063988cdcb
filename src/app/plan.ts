import { resolve } from 'node:path';
import { planAudit, writeAudit, type AuditPlan, type WrittenAudit } from '../manifest/index.js';
import { refuseLongRows } from './row-lengths.js';
import { taskDataLoader } from './task-data.js';
import { pinIfAsked, type ModelRevisions, type PinChoice } from './pinning.js';

export interface PlanGridOptions extends PinChoice {
  /** Write the audit under DIR/audits/<audit_id>/ (default: plan only). */
  out?: string;
}

/** `plan`: expand a grid, pin its model revisions (unless turned off), optionally write the audit. */
export async function planGrid(gridPath: string, options: PlanGridOptions = {}): Promise<{ plan: AuditPlan; models: ModelRevisions; written?: WrittenAudit }> {
  const artifactsDir = options.out ? resolve(options.out) : undefined;
  const { plan, models } = await pinIfAsked(await planAudit(gridPath, { ...(artifactsDir ? { artifactsDir } : {}), loadTaskData: taskDataLoader(gridPath, options.hub) }), options);
  await refuseLongRows(plan);
  if (!artifactsDir) return { plan, models };
  return { plan, models, written: await writeAudit(plan, artifactsDir) };
}

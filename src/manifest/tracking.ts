import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { writeJsonAtomic } from '../fs/index.js';

/**
 * <audit>/tracking.json: where the audit's runs send their curves besides TensorBoard (which every
 * run writes to output/tensorboard/). The trainer reads it from its run folder's audit
 * (trainer-py/canary_trainer/tracking.py); a worker's --wandb overrides it. Written by plan, submit
 * and run from the grid's `tracking:` block, or from their --wandb flag; not part of the audit id, so
 * changing it re-tracks the same runs.
 */
export const TRACKING_FILE = 'tracking.json';

export interface TrackingSettings {
  /** Weights & Biases: one W&B run per training run, grouped by audit, the cell as config. */
  wandb?: { project: string; entity?: string };
}

/** The tracking a command asked for: its --wandb PROJECT over the grid's block. */
export function trackingWith(grid: TrackingSettings | undefined, wandbProject: string | undefined): TrackingSettings {
  if (wandbProject === undefined) return grid ?? {};
  return { ...grid, wandb: { ...(grid?.wandb?.entity ? { entity: grid.wandb.entity } : {}), project: wandbProject } };
}

/** Write tracking.json (atomically), or remove it when nothing beyond TensorBoard is asked for. */
export async function writeTracking(auditDir: string, tracking: TrackingSettings): Promise<void> {
  const path = join(auditDir, TRACKING_FILE);
  if (tracking.wandb === undefined) await rm(path, { force: true });
  else await writeJsonAtomic(path, tracking);
}

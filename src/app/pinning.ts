import { hubModelsOf, pinPlanRevisions, type ModelPin, type PinOptions } from '../hub/index.js';
import type { AuditPlan } from '../manifest/index.js';

/**
 * Revision pinning as `plan`, `submit` and `run` do it: on by default (every Hub model's revision
 * becomes a commit sha in the manifests); turned off, the models left on a moving branch are
 * returned so the command can warn about them once.
 */
export interface PinChoice {
  /** Default true. */
  pinRevisions?: boolean;
  /** Hub and cache settings (default: from the environment). */
  hub?: PinOptions;
}

export interface ModelRevisions {
  pins: ModelPin[];
  /** Hub models whose manifests name a branch or tag (pinning turned off), revision null = main. */
  unpinned: { name: string; revision: string | null }[];
}

export async function pinIfAsked(plan: AuditPlan, choice: PinChoice = {}): Promise<{ plan: AuditPlan; models: ModelRevisions }> {
  if (choice.pinRevisions === false) {
    const unpinned = hubModelsOf(plan).filter((m) => !/^[0-9a-f]{40}$/.test(m.revision ?? ''));
    return { plan, models: { pins: [], unpinned } };
  }
  const pinned = await pinPlanRevisions(plan, choice.hub ?? {});
  return { plan: pinned.plan, models: { pins: pinned.pins, unpinned: [] } };
}

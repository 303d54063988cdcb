import { UserInputError } from '../errors.js';
import { formatPath, type GridPath } from '../grid/index.js';
import { COMMIT_SHA, fetchCommand, HubError, isHubId, pinModel, type ModelPin, type PinOptions } from '../hub/index.js';
import type { AuditPlan } from '../manifest/index.js';

/**
 * Revision pinning as `plan`, `submit` and `run` do it, so a manifest names the exact weights it
 * trains rather than a branch that may move (local folders and tiny models are never pinned): on
 * by default (every Hub model's revision becomes a commit sha in the manifests); turned off, the
 * models left on a moving branch are returned so the command can warn about them once.
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

export async function pinIfAsked(
  plan: AuditPlan,
  choice: PinChoice = {},
): Promise<{ plan: AuditPlan; models: ModelRevisions }> {
  if (choice.pinRevisions === false) {
    const unpinned = hubModelsOf(plan).filter((m) => !COMMIT_SHA.test(m.revision ?? ''));
    return { plan, models: { pins: [], unpinned } };
  }
  const pinned = await pinPlanRevisions(plan, choice.hub ?? {});
  return { plan: pinned.plan, models: { pins: pinned.pins, unpinned: [] } };
}

/** The distinct Hub models (name and revision) of a plan's hf runs, in plan order. */
export function hubModelsOf(plan: AuditPlan): { name: string; revision: string | null }[] {
  const seen = new Map<string, { name: string; revision: string | null }>();
  for (const run of plan.runs) {
    const m = run.cell.values.model.value;
    if (m.backend === 'hf' && isHubId(m.name))
      seen.set(`${m.name}@${m.revision ?? ''}`, { name: m.name, revision: m.revision });
  }
  return [...seen.values()];
}

/**
 * Every hf model of the plan, with its revision replaced by a commit sha (one lookup per distinct
 * name and revision), and how each was pinned. The plan given is not changed.
 */
export async function pinPlanRevisions(
  plan: AuditPlan,
  options: PinOptions = {},
): Promise<{ plan: AuditPlan; pins: ModelPin[] }> {
  const pins = new Map<string, ModelPin>();
  const runs = [];
  for (const run of plan.runs) {
    const model = run.cell.values.model;
    const m = model.value;
    if (m.backend !== 'hf' || !isHubId(m.name)) {
      runs.push(run);
      continue;
    }
    const key = `${m.name}@${m.revision ?? ''}`;
    if (!pins.has(key)) pins.set(key, await pinAt(plan, model.path, m.name, m.revision, options));
    const values = {
      ...run.cell.values,
      model: { ...model, value: { ...m, revision: (pins.get(key) as ModelPin).sha } },
    };
    runs.push({ ...run, cell: { ...run.cell, values } });
  }
  return { plan: { ...plan, runs }, pins: [...pins.values()] };
}

/** pinModel, with a wrong name or a gated model reported at its place in the grid. */
async function pinAt(
  plan: AuditPlan,
  path: GridPath,
  name: string,
  revision: string | null,
  options: PinOptions,
): Promise<ModelPin> {
  try {
    return await pinModel(name, revision, options);
  } catch (error) {
    if (!(error instanceof HubError) || error.failure === 'unreachable') throw error;
    const hint = error.failure === 'unauthorized' ? `; then ${fetchCommand(name, revision)}` : '';
    throw new UserInputError(`${error.message}${hint}`, {
      location: plan.grid.source.locate(path),
      field: formatPath(path),
      code: 'E_HUB_MODEL',
      cause: error,
    });
  }
}

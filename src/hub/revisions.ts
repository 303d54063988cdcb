import { UserInputError } from '../errors.js';
import { formatPath, type GridPath } from '../grid/index.js';
import type { AuditPlan } from '../manifest/index.js';
import { COMMIT_SHA, HubCache, type RepoType } from './cache.js';
import { hubClient, HubError, remoteCommit, type HubOptions } from './client.js';
import { hubCacheDir, hubOffline } from './env.js';

/**
 * Pin Hugging Face model revisions to commit shas at plan time, so a manifest names the exact
 * weights it trains rather than a branch that may move. The Hub is asked first; when it cannot be
 * reached (or HF_HUB_OFFLINE is set) a ref in the local cache answers, as it would for the
 * trainer. Local folders and tiny models are never pinned.
 */
export interface PinOptions extends HubOptions {
  /** Default: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. */
  cacheDir?: string;
  /** Do not call the Hub (default: HF_HUB_OFFLINE). */
  offline?: boolean;
}

/** How one repository's (a model's, a dataset's) revision became a commit sha. */
export interface ModelPin {
  name: string;
  /** The revision the grid names (main when it names none). */
  revision: string;
  sha: string;
  /** hub: asked the Hub; cache: a ref of the local cache (Hub not asked or unreachable); given: already a sha. */
  source: 'hub' | 'cache' | 'given';
  /** Why the cache answered instead of the Hub. */
  reason?: string;
  /** The snapshot folder of that sha exists in the local cache. */
  cached: boolean;
}

/** A Hub id (org/name or name), not a local folder. */
export function isHubId(name: string): boolean {
  return !name.startsWith('/') && !name.startsWith('.') && !name.startsWith('~') && /^[A-Za-z0-9][\w.-]*(\/[\w.-]+)?$/.test(name);
}

/** A pin of any repository kind: the same record. */
export type RepoPin = ModelPin;

/** The command that puts a model (or, with repoType dataset, a dataset) into the local cache. */
export function fetchCommand(name: string, revision: string | null, repoType: RepoType = 'model'): string {
  return `canary-audit ${repoType}s fetch ${name}${revision && revision !== 'main' ? ` --revision ${revision}` : ''}`;
}

export async function pinModel(name: string, revision: string | null, options: PinOptions = {}): Promise<ModelPin> {
  return pinRepo('model', name, revision, options);
}

/**
 * A revision of a Hub repository as a commit sha: a sha is taken as given; else the Hub answers;
 * when it cannot be reached (or HF_HUB_OFFLINE is set) a ref of the local cache does.
 */
export async function pinRepo(type: RepoType, name: string, revision: string | null, options: PinOptions = {}): Promise<RepoPin> {
  const rev = revision ?? 'main';
  const cache = new HubCache(options.cacheDir ?? hubCacheDir(), type);
  const cached = (sha: string): boolean => cache.cachedSha(name, sha) !== null;
  if (COMMIT_SHA.test(rev)) return { name, revision: rev, sha: rev, source: 'given', cached: cached(rev) };
  let reason = 'HF_HUB_OFFLINE is set';
  if (!(options.offline ?? hubOffline())) {
    try {
      const sha = await remoteCommit(name, rev, hubClient(options), type);
      return { name, revision: rev, sha, source: 'hub', cached: cached(sha) };
    } catch (error) {
      if (!(error instanceof HubError) || error.failure !== 'unreachable') throw error;
      reason = error.message;
    }
  }
  const sha = cache.cachedSha(name, rev);
  if (sha !== null) return { name, revision: rev, sha, source: 'cache', reason, cached: true };
  const message = `${reason}; ${name}@${rev} is not in the local cache ${cache.dir} either; fetch it where the Hub is reachable: ${fetchCommand(name, rev, type)}`;
  throw new HubError('unreachable', message, undefined, undefined, type);
}

/** The distinct Hub models (name and revision) of a plan's hf runs, in plan order. */
export function hubModelsOf(plan: AuditPlan): { name: string; revision: string | null }[] {
  const seen = new Map<string, { name: string; revision: string | null }>();
  for (const run of plan.runs) {
    const m = run.cell.values.model.value;
    if (m.backend === 'hf' && isHubId(m.name)) seen.set(`${m.name}@${m.revision ?? ''}`, { name: m.name, revision: m.revision });
  }
  return [...seen.values()];
}

/**
 * Every hf model of the plan, with its revision replaced by a commit sha (one lookup per distinct
 * name and revision), and how each was pinned. The plan given is not changed.
 */
export async function pinPlanRevisions(plan: AuditPlan, options: PinOptions = {}): Promise<{ plan: AuditPlan; pins: ModelPin[] }> {
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
    const values = { ...run.cell.values, model: { ...model, value: { ...m, revision: (pins.get(key) as ModelPin).sha } } };
    runs.push({ ...run, cell: { ...run.cell, values } });
  }
  return { plan: { ...plan, runs }, pins: [...pins.values()] };
}

/** pinModel, with a wrong name or a gated model reported at its place in the grid. */
async function pinAt(plan: AuditPlan, path: GridPath, name: string, revision: string | null, options: PinOptions): Promise<ModelPin> {
  try {
    return await pinModel(name, revision, options);
  } catch (error) {
    if (!(error instanceof HubError) || error.failure === 'unreachable') throw error;
    const hint = error.failure === 'unauthorized' ? `; then ${fetchCommand(name, revision)}` : '';
    throw new UserInputError(`${error.message}${hint}`, { location: plan.grid.source.locate(path), field: formatPath(path), code: 'E_HUB_MODEL', cause: error });
  }
}

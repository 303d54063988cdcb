import { COMMIT_SHA, HubCache, type RepoType } from './cache.js';
import { hubClient, HubError, remoteCommit, type HubOptions } from './client.js';
import { hubCacheDir, hubOffline } from './env.js';

/**
 * A Hugging Face revision (branch, tag or sha) as a commit sha. The Hub is asked first; when it
 * cannot be reached (or HF_HUB_OFFLINE is set) a ref in the local cache answers, as it would for
 * the trainer. Rewriting an audit plan with the pins is the app's (`src/app/pinning.ts`).
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
  return (
    !name.startsWith('/') &&
    !name.startsWith('.') &&
    !name.startsWith('~') &&
    /^[A-Za-z0-9][\w.-]*(\/[\w.-]+)?$/.test(name)
  );
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
export async function pinRepo(
  type: RepoType,
  name: string,
  revision: string | null,
  options: PinOptions = {},
): Promise<RepoPin> {
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

import { UserInputError, quoteValue } from '../errors.js';
import { fetchDataset, type DatasetHubOptions, type FetchedDataset } from '../datasets/index.js';
import { isHubId } from '../hub/index.js';

/**
 * `datasets fetch`: put a Hub dataset's card and split files into the local Hugging Face cache,
 * where a plan on a machine without the Hub (or with HF_HUB_OFFLINE=1) finds them.
 */
export interface DatasetFetchRequest {
  repo: string;
  revision: string | null;
  config?: string;
  /** Splits to fetch; null: every split of the config. */
  splits: string[] | null;
}

export function datasetFetchRequest(repo: string, flags: { revision?: string; config?: string; splits?: string[] }): DatasetFetchRequest {
  if (!isHubId(repo)) {
    throw new UserInputError(`${quoteValue(repo)} is not a Hub dataset id (org/name); a local file or folder needs no fetch: name it in the task's source.path`, { code: 'E_BAD_ARGS' });
  }
  const splits = flags.splits && flags.splits.length > 0 ? [...new Set(flags.splits)] : null;
  return { repo, revision: flags.revision ?? null, config: flags.config, splits };
}

/** Always asks the Hub (HF_HUB_OFFLINE notwithstanding, as `models fetch`); an unreachable Hub is an error, not the cache. */
export async function fetchDatasetToCache(request: DatasetFetchRequest, options: Omit<DatasetHubOptions, 'offline'> = {}): Promise<FetchedDataset> {
  return fetchDataset(request.repo, { revision: request.revision, config: request.config, splits: request.splits }, { ...options, offline: false, fallbackToCache: false });
}

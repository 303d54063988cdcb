import { UserInputError, quoteValue } from '../errors.js';
import type { DatasetFormat } from '../contracts/index.js';
import { fetchDataset, type DatasetHubOptions, type FetchedDataset } from '../datasets/index.js';
import { formatPath, loadGrid } from '../grid/index.js';
import { canonicalJson } from '../hash.js';
import { taskDataRequest, TaskSpecError, utilityDataRequest, type TaskDataRequest } from '../manifest/index.js';
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
  /** A grid task's own split -> files mapping and format (GRID mode). */
  files?: Record<string, string | string[]>;
  format?: DatasetFormat;
  /** Files fetched besides the splits' (a grounding task's images named by path), as globs. */
  assets?: string[];
}

/**
 * `datasets fetch GRID`: every Hub dataset the grid's tasks read, each with the splits its task
 * reads (train and utility) at the revision its source names, deduplicated. A task whose
 * parameters are wrong is reported at its place in the grid.
 */
export async function gridDatasetRequests(file: string): Promise<DatasetFetchRequest[]> {
  const grid = await loadGrid(file);
  const seen = new Map<string, DatasetFetchRequest>();
  for (const value of grid.expansion.axes.task) {
    let requests: TaskDataRequest[];
    try {
      requests = [taskDataRequest(value.value), utilityDataRequest(value.value)].filter(
        (r): r is TaskDataRequest => r !== null,
      );
    } catch (error) {
      if (!(error instanceof TaskSpecError)) throw error;
      const path = [...value.path, ...error.field];
      throw new UserInputError(`task ${value.label}: ${error.message}`, {
        location: grid.source.locate(path),
        field: formatPath(path),
        code: 'E_TASK',
      });
    }
    for (const request of requests) {
      const source = request.source;
      if (!source.repo) continue;
      const r: DatasetFetchRequest = {
        repo: source.repo,
        revision: source.revision ?? null,
        ...(source.config ? { config: source.config } : {}),
        splits: request.splits,
        ...(source.files ? { files: source.files } : {}),
        ...(source.format ? { format: source.format } : {}),
        ...(request.assets ? { assets: request.assets } : {}),
      };
      seen.set(canonicalJson(r), r);
    }
  }
  return [...seen.values()];
}

export function datasetFetchRequest(
  repo: string,
  flags: { revision?: string; config?: string; splits?: string[] },
): DatasetFetchRequest {
  if (!isHubId(repo)) {
    throw new UserInputError(
      `${quoteValue(repo)} is not a Hub dataset id (org/name); a local file or folder needs no fetch: name it in the task's source.path`,
      { code: 'E_BAD_ARGS' },
    );
  }
  const splits = flags.splits && flags.splits.length > 0 ? [...new Set(flags.splits)] : null;
  return { repo, revision: flags.revision ?? null, config: flags.config, splits };
}

/** Always asks the Hub (HF_HUB_OFFLINE notwithstanding, as `models fetch`); an unreachable Hub is an error, not the cache. */
export async function fetchDatasetToCache(
  request: DatasetFetchRequest,
  options: Omit<DatasetHubOptions, 'offline'> = {},
): Promise<FetchedDataset> {
  const { revision, config, splits, files, format, assets } = request;
  return fetchDataset(
    request.repo,
    {
      revision,
      config,
      splits,
      ...(files ? { files } : {}),
      ...(format ? { format } : {}),
      ...(assets ? { assets } : {}),
    },
    { ...options, offline: false, fallbackToCache: false },
  );
}

import { dirname, resolve } from 'node:path';
import { DatasetError, loadTaskData, type LoadOptions } from '../datasets/index.js';
import type { PinOptions } from '../hub/index.js';
import { TaskDataError, type TaskDataLoader } from '../manifest/index.js';

/**
 * How `plan`, `submit` and `run` read a dataset-backed task's rows: from the local file or folder
 * its source names (already absolute), or from the Hub dataset pinned to a commit and cached in
 * the standard Hugging Face cache. A dataset error keeps its code and is reported at the task's
 * place in the grid (its `field`, e.g. source.revision).
 */
export function taskDataLoader(gridPath: string, hub: PinOptions = {}): TaskDataLoader {
  const options: LoadOptions = { gridDir: dirname(resolve(gridPath)), ...hub };
  return async (request) => {
    try {
      return await loadTaskData(request.source, request.splits, options, request.assets);
    } catch (error) {
      if (!(error instanceof DatasetError)) throw error;
      throw new TaskDataError(error.message, (error.field ?? 'source').split('.'), error.code, { cause: error });
    }
  };
}

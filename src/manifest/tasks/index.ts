import type { DatasetSourceSpec, TaskData } from '../../contracts/index.js';
import { BANKING77 } from './banking77.js';
import {
  createDatasetTask,
  datasetSplits,
  GENERIC_DATASET,
  resolveDatasetParams,
  type DatasetPreset,
} from './dataset/task.js';
import { syntheticEmailTask, type EmailStyle } from './synthetic-email/index.js';
import { TAT_QA } from './tat-qa.js';
import { guiGroundingTask, type GuiGroundingParams } from './gui-grounding/index.js';
import {
  createGroundingTask,
  groundingAssets,
  groundingSplits,
  groundingUtilitySource,
  resolveGroundingParams,
  resolveUtilityParams,
  withUtilitySource,
} from './grounding-dataset.js';
import { ImageStore } from '../images/index.js';
import { TaskSpecError } from './dataset/records.js';
import type { Task } from './task.js';

export type { CanaryExample, DrawnIdentity, RowPurpose, Task, TaskExample, UtilityMetric } from './task.js';
export { EMAIL_STYLES, type EmailStyle } from './synthetic-email/index.js';
export { TaskSpecError };
export type { DatasetTaskParams } from './dataset/task.js';

/** A task as the grid names it: registry name plus its parameters (already schema-validated). */
export interface TaskSpec {
  name: string;
  params: Record<string, unknown>;
}

/** Dataset-backed tasks by name: the generic mapping and its presets. */
const DATASET_TASKS: Record<string, DatasetPreset> = {
  dataset: GENERIC_DATASET,
  banking77: BANKING77,
  'tat-qa': TAT_QA,
};

export const TASK_NAMES: readonly string[] = [
  'synthetic-email',
  'gui-grounding',
  'grounding',
  ...Object.keys(DATASET_TASKS),
];

/** What a task needs loaded before it can plan: a dataset source and the splits it reads, or null. */
export interface TaskDataRequest {
  source: DatasetSourceSpec;
  splits: string[];
  /** Files fetched with the splits but not read as records (images named by path), as globs. */
  assets?: string[];
}

/** Tasks that take a `utility` source apart from their training source. */
const UTILITY_SOURCE_TASKS = new Set(['grounding', 'gui-grounding']);

/** Throws TaskSpecError when the parameters are wrong (a missing source). */
export function taskDataRequest(spec: TaskSpec): TaskDataRequest | null {
  if (spec.name === 'grounding') {
    const params = resolveGroundingParams(spec.params);
    const assets = groundingAssets(params);
    return { source: params.source, splits: groundingSplits(params), ...(assets.length > 0 ? { assets } : {}) };
  }
  const preset = DATASET_TASKS[spec.name];
  if (!preset) return null;
  const params = resolveDatasetParams(preset, spec.params);
  return { source: params.source, splits: datasetSplits(params) };
}

/**
 * The dataset a task value's `utility` key reads (its utility rows apart from the training
 * source), or null when it has none. Throws TaskSpecError (field under `utility`).
 */
export function utilityDataRequest(spec: TaskSpec): TaskDataRequest | null {
  if (spec.params.utility === undefined) return null;
  if (!UTILITY_SOURCE_TASKS.has(spec.name))
    throw new TaskSpecError(
      `task ${spec.name} takes no utility source (only ${[...UTILITY_SOURCE_TASKS].join(' and ')} do)`,
      ['utility'],
    );
  const params = resolveUtilityParams(spec.params.utility);
  const assets = groundingAssets(params);
  return { source: params.source, splits: [params.split], ...(assets.length > 0 ? { assets } : {}) };
}

/** A task generator; dataset-backed tasks take their loaded rows. Throws TaskSpecError on bad rows or templates. */
export function createTask(spec: TaskSpec, data?: TaskData, utilityData?: TaskData): Task {
  if (spec.name === 'synthetic-email')
    return syntheticEmailTask((spec.params.style as EmailStyle | undefined) ?? 'compact');
  if (spec.name === 'gui-grounding') {
    const { utility, ...params } = spec.params as Partial<GuiGroundingParams> & { utility?: unknown };
    if (utility === undefined) return guiGroundingTask(params);
    const images = new ImageStore();
    const task = guiGroundingTask(params, images);
    return withUtilitySource(
      task,
      groundingUtilitySource(utility, utilityData, images, task.params.style !== 'compact'),
      utility,
    );
  }
  if (spec.name === 'grounding') return createGroundingTask(spec.params, data, utilityData);
  const preset = DATASET_TASKS[spec.name];
  if (!preset) throw new RangeError(`unknown task ${JSON.stringify(spec.name)}; known: ${TASK_NAMES.join(', ')}`);
  return createDatasetTask(preset, spec.params, data);
}

import type { DatasetSourceSpec, TaskData } from '../../contracts/index.js';
import { BANKING77 } from './banking77.js';
import { createDatasetTask, datasetSplits, GENERIC_DATASET, resolveDatasetParams, type DatasetPreset } from './dataset/task.js';
import { syntheticEmailTask, type EmailStyle } from './synthetic-email/index.js';
import { TAT_QA } from './tat-qa.js';
import { guiGroundingTask, type GuiGroundingParams } from './gui-grounding/index.js';
import type { Task } from './task.js';

export type { CanaryExample, DrawnIdentity, RowPurpose, Task, TaskExample, UtilityMetric } from './task.js';
export { EMAIL_STYLES, type EmailStyle } from './synthetic-email/index.js';
export { TaskSpecError } from './dataset/records.js';
export type { DatasetTaskParams } from './dataset/task.js';

/** A task as the grid names it: registry name plus its parameters (already schema-validated). */
export interface TaskSpec {
  name: string;
  params: Record<string, unknown>;
}

/** Dataset-backed tasks by name: the generic mapping and its presets. */
const DATASET_TASKS: Record<string, DatasetPreset> = { dataset: GENERIC_DATASET, banking77: BANKING77, 'tat-qa': TAT_QA };

export const TASK_NAMES: readonly string[] = ['synthetic-email', 'gui-grounding', ...Object.keys(DATASET_TASKS)];

/** What a task needs loaded before it can plan: a dataset source and the splits it reads, or null. */
export interface TaskDataRequest {
  source: DatasetSourceSpec;
  splits: string[];
}

/** Throws TaskSpecError when the parameters are wrong (a missing source). */
export function taskDataRequest(spec: TaskSpec): TaskDataRequest | null {
  const preset = DATASET_TASKS[spec.name];
  if (!preset) return null;
  const params = resolveDatasetParams(preset, spec.params);
  return { source: params.source, splits: datasetSplits(params) };
}

/** A task generator; dataset-backed tasks take their loaded rows. Throws TaskSpecError on bad rows or templates. */
export function createTask(spec: TaskSpec, data?: TaskData): Task {
  if (spec.name === 'synthetic-email') return syntheticEmailTask((spec.params.style as EmailStyle | undefined) ?? 'compact');
  if (spec.name === 'gui-grounding') return guiGroundingTask(spec.params as Partial<GuiGroundingParams>);
  const preset = DATASET_TASKS[spec.name];
  if (!preset) throw new RangeError(`unknown task ${JSON.stringify(spec.name)}; known: ${TASK_NAMES.join(', ')}`);
  return createDatasetTask(preset, spec.params, data);
}

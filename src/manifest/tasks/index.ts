import { syntheticEmailTask, type EmailStyle } from './synthetic-email/index.js';
import type { Task } from './task.js';

export type { CanaryExample, DrawnIdentity, Task, TaskExample } from './task.js';
export { EMAIL_STYLES, type EmailStyle } from './synthetic-email/index.js';

/** A task as the grid names it: registry name plus its parameters (already schema-validated). */
export interface TaskSpec {
  name: string;
  params: Record<string, unknown>;
}

/** Registry of task generators by name. */
const TASKS: Record<string, (params: Record<string, unknown>) => Task> = {
  'synthetic-email': (params) => syntheticEmailTask((params.style as EmailStyle | undefined) ?? 'compact'),
};

export const TASK_NAMES: readonly string[] = Object.keys(TASKS);

export function createTask(spec: TaskSpec): Task {
  const factory = TASKS[spec.name];
  if (!factory) throw new RangeError(`unknown task ${JSON.stringify(spec.name)}; known: ${TASK_NAMES.join(', ')}`);
  return factory(spec.params);
}

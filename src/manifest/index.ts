/**
 * Audit grid → training manifests: plan (validate, expand, draw canaries, place them) and write
 * (stream rows, hash, assemble run folders atomically).
 */
export {
  planAudit,
  planAuditText,
  planAuditTextWithData,
  planTask,
  TaskDataError,
  type AuditPlan,
  type PlanOptions,
  type TaskDataLoader,
  type TokenizerLoader,
} from './plan.js';
export { bpeTokenizer, hfRareTokens, type BpeTokenizer, type RareToken } from './hf-rare-tokens.js';
export { writeAudit, runIdOf, type WrittenAudit, type WrittenRun } from './write.js';
export { auditIndex } from './audit-index.js';
export { TRACKING_FILE, trackingWith, writeTracking, type TrackingSettings } from './tracking.js';
export { buildManifestCore, runRenderer, GRID_FILE_FROM_RUN, type ManifestCore, type RunRenderer } from './manifest.js';
export { layoutRun, type PlacedCanary, type RunLayout, type RunStats } from './plan-run.js';
export {
  canaryTrainingRow,
  trainingRowLines,
  utilityRowCount,
  utilityRowLines,
  writeLines,
  hashLines,
} from './rows.js';
export { pretrainRowLines, pretrainCorpusKey, pretrainManifestSpec, PRETRAIN_FILE } from './pretrain.js';
export { CanaryPool, type PoolCanary } from './canaries.js';
export { InfeasiblePlacement, updateRange } from './placement.js';
export {
  createTask,
  taskDataRequest,
  utilityDataRequest,
  TaskSpecError,
  TASK_NAMES,
  type Task,
  type TaskDataRequest,
  type TaskSpec,
  type UtilityMetric,
} from './tasks/index.js';
export {
  backgroundToCheck,
  checkHfLengths,
  type TokenCount,
  type TokenCounter,
  type TokenJob,
  type TokenRow,
} from './length-check.js';

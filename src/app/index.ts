/**
 * The application: what each command does, composed from the layers below (manifest planning,
 * the queue, the runners, the report). The CLI parses arguments and prints; this layer decides.
 */
export { loadAuditSource, type AuditSource } from './audit-source.js';
export { planGrid, type PlanGridOptions } from './plan.js';
export { submitSource } from './submit.js';
export { runAuditLocally, type LocalAuditOptions, type LocalAuditResult } from './run-audit.js';
export { runLooks, sequentialOfAudit, type LookDriver, type SequentialGrid } from './sequential-audit.js';
export { modelsToFetch, fetchModels, type ModelRef } from './models-fetch.js';
export {
  datasetFetchRequest,
  fetchDatasetToCache,
  gridDatasetRequests,
  type DatasetFetchRequest,
} from './datasets-fetch.js';
export { pinIfAsked, pinPlanRevisions, hubModelsOf, type ModelRevisions, type PinChoice } from './pinning.js';
export { auditsOnDisk, notQueuedLines, notQueuedReason, type DiskAudit } from './disk-audits.js';
export { CLI_SCRIPT, cliCommand, pathArg, shellWord } from './invocation.js';
export { taskDataLoader } from './task-data.js';
export {
  checkSlurmOptions,
  currentCli,
  DEFAULT_SLURM,
  sbatchAnswer,
  slurmScript,
  submitSlurmScript,
  writeSlurmScript,
  type SlurmScriptOptions,
} from './slurm.js';

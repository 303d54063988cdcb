/**
 * The distributed engine's queue half: BullMQ flows on Redis. An audit is a parent job with one
 * child job per run; `submit`, `cancel` and `status` talk to the same Redis from any host. The
 * worker runtime that takes these jobs is `src/worker/`; the terminal views are `src/cli/views/`.
 */
export {
  AUDIT_JOB,
  AUDITS_QUEUE,
  DEFAULT_PREFIX,
  queueKeys,
  queuePrefix,
  RUN_JOB,
  RUNS_QUEUE,
  type QueueKeys,
} from './names.js';
export {
  assertRedisReachable,
  maskRedisUrl,
  parseRedisUrl,
  passwordInFlagWarning,
  redisTargetFrom,
  requireRedisTarget,
  type RedisTarget,
} from './connection.js';
export { DEFAULT_TUNING, resolveTuning, type QueueTuning } from './tuning.js';
export type {
  AuditJobData,
  AuditReturn,
  RunJobData,
  RunPhase,
  RunProgress,
  RunReturn,
  RunWait,
  SequentialProgress,
} from './job-data.js';
export {
  jobIdFromKey,
  openFlowProducer,
  openQueues,
  openRedis,
  queueConnection,
  type QueueConnection,
  type QueueHandles,
} from './queues.js';
export {
  KEEP_LOGS,
  submitAudit,
  type SubmitAuditInput,
  type SubmitExtras,
  type SubmitOutcome,
  type SubmitRun,
} from './submit-audit.js';
export { extendAudit } from './extend-audit.js';
export { cancelAudit, purgeAudit, waitStopped, type CancelOutcome } from './cancel-audit.js';
export {
  auditDone,
  collectStatus,
  RUN_STATES,
  runStateOf,
  type AuditState,
  type AuditStatus,
  type RunState,
  type RunStatus,
  type StatusHandles,
} from './status.js';
export {
  clearFailureRecord,
  FAILURE_FILE,
  kindFromReason,
  writeFailureRecord,
  writeFailureRecordIfMissing,
} from './failure-record.js';
export {
  DEFAULT_HEARTBEAT_MS,
  describeSlurmJob,
  FleetHeartbeat,
  fleetKeys,
  heartbeatMs,
  LOSS_POINTS,
  LossCurveWriter,
  parseNvidiaSmi,
  queryGpus,
  readFleet,
  readLossCurves,
  readStoppedWorkers,
  slurmJobInfo,
  throughputByHost,
  type GpuInfo,
  type SlurmJobInfo,
  type StoppedWorker,
  type WorkerBeat,
  type WorkerSlotBeat,
  type WorkerState,
  type WorkerStatus,
} from './fleet.js';
export { auditEta, estimateAudit, type AuditEstimate } from './audit-eta.js';
export { baseWait, waitHolder } from './base-wait.js';
export { cellColumns, parseCellId, varyingCellAxes } from './cell-columns.js';
export {
  findOnPath,
  freePort,
  privateRedisTarget,
  REDIS_INSTALL_HINT,
  startEmbeddedRedis,
  type EmbeddedRedis,
  type EmbeddedRedisOptions,
} from './embedded-redis.js';

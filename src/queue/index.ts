/**
 * The distributed engine: BullMQ flows on Redis. An audit is a parent job with one child job per
 * run; workers (one per GPU, or CPU shares) run the trainer for each child; `cancel` and `status`
 * talk to the same Redis from any host.
 */
export * from './names.js';
export * from './connection.js';
export * from './tuning.js';
export * from './job-data.js';
export * from './queues.js';
export * from './artifact-path.js';
export * from './submit-audit.js';
export * from './cancel-audit.js';
export * from './status.js';
export * from './status-format.js';
export * from './slots.js';
export * from './failure-record.js';
export * from './progress-tracker.js';
export * from './live-view.js';
export * from './fleet.js';
export * from './fleet-format.js';
export * from './audit-eta.js';
export * from './cell-columns.js';
export { createRunProcessor, ABORT_CANCEL, ABORT_SHUTDOWN, type WorkerSlot, type RunProcessorContext } from './run-processor.js';
export { createAuditProcessor } from './audit-processor.js';
export { WorkerPool, SHUTDOWN_MARGIN_MS, type WorkerPoolOptions } from './worker-pool.js';
export { startEmbeddedRedis, freePort, findOnPath, privateRedisTarget, REDIS_INSTALL_HINT, type EmbeddedRedis, type EmbeddedRedisOptions } from './embedded-redis.js';

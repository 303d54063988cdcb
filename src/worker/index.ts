/**
 * The worker runtime: a pool of slots (one per GPU, or CPU shares) that takes run jobs from the
 * queue, runs the trainer for each as a supervised child process, folds its progress events into
 * the job, and gives a job back on shutdown or a lost lease.
 */
export { WorkerPool, SHUTDOWN_MARGIN_MS, type ShutdownReport, type WorkerPoolOptions } from './worker-pool.js';
export {
  createRunProcessor,
  ABORT_CANCEL,
  ABORT_LEASE,
  ABORT_SHUTDOWN,
  type WorkerSlot,
  type RunProcessorContext,
} from './run-processor.js';
export { createAuditProcessor } from './audit-processor.js';
export { cpuSlots, defaultCpuSlotCount, describeSlot, detectGpus, gangSlot, gpuSlots, SlotBook } from './slots.js';
export { ProgressTracker, type TrackerLimits, type TrackerOutput } from './progress-tracker.js';
export { shortLockWarning, TESTED_LOCK_MS } from './lock-floor.js';

/** Metrics: pure functions of stored scores, greedy outputs and a seed. */
export * from './rank.js';
export * from './exposure.js';
export * from './candidate-index.js';
export * from './recovery.js';
export * from './statistics.js';
export * from './bootstrap.js';
export * from './wilson.js';
export * from './design-proportion.js';
export * from './observation.js';
export * from './cells.js';
export * from './arm.js';
export * from './space-check.js';
export * from './aggregate.js';
export * from './paired.js';
export * from './utility.js';
export * from './privacy.js';
export * from './distributions.js';

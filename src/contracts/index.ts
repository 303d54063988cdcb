export * from './manifest.js';
export * from './progress.js';
export * from './result.js';
export * from './audit.js';
export * from './dataset.js';
export * from './sequential.js';

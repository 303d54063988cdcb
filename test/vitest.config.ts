import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';

export default defineConfig({
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    include: ['test/**/*.test.ts'],
    // Keep the controller's info logs out of test output; warnings and errors still show.
    env: { CANARY_AUDIT_LOG_LEVEL: process.env.CANARY_AUDIT_LOG_LEVEL ?? 'warn' },
    // Tests that start redis-server or the Python trainer need more than the default 5 s.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // Two cores: one test file per core; files that train models are heavy.
    pool: 'forks',
    maxWorkers: 2,
    fileParallelism: true,
  },
});

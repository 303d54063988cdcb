import { defineConfig } from 'vitest/config';
import { fileURLToPath } from 'node:url';
import { tiers } from './tiers/tiers.js';

const root = fileURLToPath(new URL('..', import.meta.url));
// Three tiers (test/tiers/tiers.ts): `fast` has no redis-server, no Python, no browser (`npm test`);
// `slow` is every file marked `// tier: slow`. `npm run test:all` runs both.
const { fast, slow, full } = tiers(root);

export default defineConfig({
  root,
  test: {
    // Keep the controller's info logs out of test output; warnings and errors still show.
    env: { CANARY_AUDIT_LOG_LEVEL: process.env.CANARY_AUDIT_LOG_LEVEL ?? 'warn' },
    // Tests that start redis-server or the Python trainer need more than the default 5 s; test:all
    // runs pytest beside vitest on the same 2 cores, so these limits (hang guards) leave room for that.
    testTimeout: 240_000,
    hookTimeout: 120_000,
    // Child processes run the built CLI; this rebuilds dist/ when src/ is newer.
    globalSetup: ['test/global-setup.ts'],
    // Two cores: one test file per core; files that train models are heavy.
    pool: 'forks',
    maxWorkers: 2,
    fileParallelism: true,
    projects: [
      { extends: true, test: { name: 'fast', include: fast, setupFiles: ['test/tiers/fast-setup.ts'] } },
      { extends: true, test: { name: 'slow', include: slow } },
      // Multi-minute studies (`// tier: full`): `npm run test:full` only, not test:all or CI.
      { extends: true, test: { name: 'full', include: full } },
    ],
  },
});

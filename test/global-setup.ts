import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../src/paths.js';
import { staleBuild } from './helpers/cli-entry.js';

/**
 * Once per vitest run: tests start the built CLI (test/helpers/cli-entry.ts), so build it when
 * dist/ is missing or older than src/ (`npm run build`; a no-op check after `npm run test:all`'s
 * own build).
 */
export default function setup(): void {
  const why = staleBuild();
  if (why === null) return;
  process.stderr.write(`canary-audit tests: ${why}; building it (npm run build)\n`);
  execFileSync(
    process.execPath,
    [join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
    { cwd: PACKAGE_ROOT, stdio: 'inherit' },
  );
}

import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * How tests start the canary-audit CLI as a child process, as users run it: the built CLI
 * (`node dist/cli/main.js`, what the `canary-audit` bin runs). A start from the sources through
 * tsx costs about 2 s of CPU more per process, and the suite starts some hundred of them; the
 * global setup (test/global-setup.ts) rebuilds dist/ first when it is older than src/.
 */
export const CLI_ENTRY = join(PACKAGE_ROOT, 'dist', 'cli', 'main.js');
export const CLI = [CLI_ENTRY];

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

/** Why dist/ cannot run the current sources, or null when it can. */
export function staleBuild(): string | null {
  let built: number;
  try {
    built = statSync(CLI_ENTRY).mtimeMs;
  } catch {
    return `${CLI_ENTRY} does not exist`;
  }
  const sources = Math.max(newest(join(PACKAGE_ROOT, 'src')), statSync(join(PACKAGE_ROOT, 'tsconfig.json')).mtimeMs);
  return sources > built ? `src/ changed after ${CLI_ENTRY} was built` : null;
}

import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package root (the folder holding package.json, schemas/ and trainer-py/), found from this
 * module's location so it works from src/ (tests, tsx) and from dist/ (the built CLI).
 */
function findPackageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i += 1) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'schemas'))) return dir;
    dir = dirname(dir);
  }
  throw new Error('canary-audit: cannot find the package root (package.json beside schemas/)');
}

export const PACKAGE_ROOT = findPackageRoot();
export const SCHEMAS_DIR = join(PACKAGE_ROOT, 'schemas');
export const TRAINER_DIR = join(PACKAGE_ROOT, 'trainer-py');
export const CONFIGS_DIR = join(PACKAGE_ROOT, 'configs');

/** Default artifact folder: $CANARY_AUDIT_HOME or ./artifacts. */
export function defaultArtifactsDir(): string {
  return resolve(process.env.CANARY_AUDIT_HOME ?? 'artifacts');
}

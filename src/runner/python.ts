import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TRAINER_DIR } from '../paths.js';

/**
 * The one place that decides which Python runs the trainer: `run`, `worker` (local runner), the
 * TypeScript tests, `npm run test:py` and the benchmarks all ask here.
 *   1. $CANARY_AUDIT_PYTHON when set and not empty;
 *   2. else the trainer's virtual environment, trainer-py/.venv, built by `bash .ci/setup` from
 *      trainer-py/requirements.lock (the pinned stack the trainer image installs too).
 * The default is returned even when the venv is missing, so the failure names it (see
 * trainerPythonHint) instead of silently running another Python with other library versions.
 */
export const TRAINER_VENV = join(TRAINER_DIR, '.venv');
export const PYTHON_ENV = 'CANARY_AUDIT_PYTHON';

export function trainerPython(env: NodeJS.ProcessEnv = process.env): string {
  const override = env[PYTHON_ENV];
  if (override) return override;
  return join(TRAINER_VENV, 'bin', 'python');
}

/** What to do when the trainer's Python cannot be started; null when it exists. */
export function trainerPythonHint(python: string = trainerPython()): string | null {
  if (python.includes('/') && !existsSync(python)) {
    return python === join(TRAINER_VENV, 'bin', 'python')
      ? `the trainer's Python environment is missing (${python}): run \`bash .ci/setup\` to build it from trainer-py/requirements.lock, or set ${PYTHON_ENV}`
      : `${PYTHON_ENV}=${python} does not exist`;
  }
  return null;
}

// `tsx src/runner/python.ts` (or `node dist/runner/python.js`) prints the interpreter: package.json
// scripts use it so they resolve it the same way.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const hint = trainerPythonHint();
  if (hint) process.stderr.write(`canary-audit: ${hint}\n`);
  process.stdout.write(`${trainerPython()}\n`);
}

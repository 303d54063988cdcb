import { execa, type ResultPromise } from 'execa';
import { PACKAGE_ROOT } from '../../../src/paths.js';
import { CLI } from '../../helpers/cli-entry.js';
import { standInEnv, waitFor } from './fixtures.js';

/**
 * The canary-audit CLI as users run it, in a child process (the built CLI, test/helpers/cli-entry.ts).
 * Worker processes are started with test timings (2 s locks, 1 s stalled checks).
 */
export { CLI };

export const FAST_ENV: Record<string, string> = {
  CANARY_AUDIT_LOCK_MS: '2000',
  CANARY_AUDIT_STALLED_MS: '1000',
  CANARY_AUDIT_STOP_GRACE_MS: '5000',
  CANARY_AUDIT_PROGRESS_MS: '100',
  CANARY_AUDIT_STEP_LOG_MS: '1000',
  CANARY_AUDIT_DRAIN_S: '1',
  CANARY_AUDIT_BACKOFF_MS: '200',
  CANARY_AUDIT_LOG_FORMAT: 'json',
};

export function runCli(args: string[], env: Record<string, string> = {}) {
  return execa(process.execPath, [...CLI, ...args], {
    cwd: PACKAGE_ROOT,
    env: { ...FAST_ENV, ...env },
    reject: false,
    all: true,
  });
}

export interface WorkerProcess {
  process: ResultPromise<{ all: true; reject: false }>;
  output(): string;
}

/** Start `canary-audit worker` running the stand-in trainer; resolves once it is ready. */
export async function startWorker(args: string[], env: Record<string, string> = {}): Promise<WorkerProcess> {
  const child = execa(process.execPath, [...CLI, 'worker', ...args], {
    cwd: PACKAGE_ROOT,
    env: { ...FAST_ENV, ...standInEnv(), ...env },
    reject: false,
    all: true,
    buffer: { all: true },
  });
  let text = '';
  child.all?.on('data', (chunk: Buffer) => {
    text += chunk.toString();
  });
  const worker = { process: child, output: () => text };
  await waitFor(
    'the worker to be ready',
    () => text.includes('canary-audit worker:') || (child.exitCode !== null ? Promise.reject(new Error(text)) : false),
    60_000,
  );
  return worker;
}

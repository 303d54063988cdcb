import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunFailure } from '../contracts/result.js';
import { writeJsonAtomic } from '../fs/atomic.js';
import { FAILURE_FILE } from '../layout.js';

/**
 * runs/<run_id>/output/failure.json: written when a run fails for good (no attempt left, a final
 * trainer error, cancelled, or stalled too often), so the report can list the run and say why.
 * Removed when a later attempt of the same run succeeds.
 */
export { FAILURE_FILE };

export async function writeFailureRecord(outDir: string, failure: RunFailure): Promise<void> {
  await writeJsonAtomic(join(outDir, FAILURE_FILE), failure);
}

export async function writeFailureRecordIfMissing(outDir: string, failure: RunFailure): Promise<boolean> {
  if (existsSync(join(outDir, FAILURE_FILE))) return false;
  await writeFailureRecord(outDir, failure);
  return true;
}

export async function clearFailureRecord(outDir: string): Promise<void> {
  await rm(join(outDir, FAILURE_FILE), { force: true });
}

/** The failure kind BullMQ's own messages imply (for failures no trainer reported). */
export function kindFromReason(reason: string): string {
  if (/stalled more than allowable limit/i.test(reason)) return 'stalled';
  if (/started more than allowable limit/i.test(reason)) return 'restarted_too_often';
  const prefix = /^([a-z_]+): /.exec(reason);
  return prefix?.[1] ?? 'failed';
}

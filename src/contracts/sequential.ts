import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { UserInputError } from '../errors.js';
import { readJsonFile, writeJsonAtomic } from '../fs/index.js';
import type { Look, LookRecord, SpendingFunction, StoppedComparison } from '../metrics/sequential.js';

/**
 * sequential.json: the record of an audit with sequential replicates (`replicates: {until:
 * decided}`), beside audit.json. audit.json lists every run the grid plans (max seeds per cell);
 * this file says which of them the looks took (`taken`), the looks read so far, and why each
 * declared comparison stopped. The report reads only the taken runs, and its verdicts are the ones
 * read at each comparison's stopping look, at that look's spent α.
 */
export const SEQUENTIAL_FILE = 'sequential.json';
export const SEQUENTIAL_VERSION = 'canary-audit.sequential/1';

export interface SequentialRecord {
  schema_version: typeof SEQUENTIAL_VERSION;
  min: number;
  max: number;
  spending: SpendingFunction;
  /** The family's level over all looks (1 − the report's confidence). */
  alpha: number;
  /** The seed axis's values in the order looks add them. */
  seeds: (number | string)[];
  schedule: Look[];
  /** Run ids the looks submitted so far, in order. */
  taken: string[];
  /** The look whose runs are taken but not yet read; null once the audit is done. */
  pending_look: number | null;
  looks: LookRecord[];
  /** Comparisons that stopped, each with the verdict (report/verdicts.ts) read at its look in `detail`. */
  stopped: StoppedComparison[];
  done: boolean;
}

export const sequentialPath = (auditDir: string): string => join(auditDir, SEQUENTIAL_FILE);

/** The audit's sequential record, or null when it has none (a fixed grid, or not started). */
export async function readSequentialRecord(auditDir: string): Promise<SequentialRecord | null> {
  const path = sequentialPath(auditDir);
  if (!existsSync(path)) return null;
  const raw = (await readJsonFile(path, auditDir)) as Partial<SequentialRecord> | null;
  if (
    raw?.schema_version !== SEQUENTIAL_VERSION ||
    !Array.isArray(raw.taken) ||
    !Array.isArray(raw.looks) ||
    !Array.isArray(raw.stopped) ||
    !Array.isArray(raw.schedule)
  ) {
    throw new UserInputError(
      `not a sequential record (${SEQUENTIAL_VERSION}: taken, looks, stopped, schedule); remove it to start the looks again from the runs on disk`,
      { location: { file: path }, code: 'E_BAD_AUDIT' },
    );
  }
  return raw as SequentialRecord;
}

export async function writeSequentialRecord(auditDir: string, record: SequentialRecord): Promise<void> {
  await writeJsonAtomic(sequentialPath(auditDir), record);
}

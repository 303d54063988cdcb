import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { UserInputError } from '../errors.js';
import { readJsonFile, writeJsonAtomic } from '../fs/index.js';

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

/** The stopping rule's values (src/metrics/sequential.ts uses them; the record stores them). */
export type SpendingFunction = 'pocock' | 'obrien-fleming';

export interface Look {
  /** 1-based look number. */
  look: number;
  /** Seeds per (still needed) cell at this look. */
  seeds: number;
  /** Information fraction seeds / max. */
  fraction: number;
  /** α spent up to and including this look. */
  spent: number;
  /** This look's own level, tested by itself: spent − the previous look's spent. */
  alpha: number;
}

/** A comparison as read at one look (the family's verdicts at that look's α, Holm over the open ones). */
export interface LookReading {
  comparison: string;
  /** The cells (arms: labels without the seed) the comparison rests on, as canonical keys. */
  arms: string[];
  verdict: 'higher' | 'lower' | 'equivalent' | 'undecided';
  within_margin: boolean;
  estimate: number;
  lo: number;
  hi: number;
  n_runs: number;
  /** The plain sentence the report and `run` print. */
  sentence: string;
  /** The full verdict as the report writes it (report/verdicts.ts), kept with the stop. */
  detail?: unknown;
}

/** Why a comparison stopped: decided at its look, or the design's last look reached undecided or not. */
export type StopReason = 'decided' | 'max';

export interface StoppedComparison extends LookReading {
  reason: StopReason;
  look: number;
  seeds: number;
  /** The look's own level: the verdict's tests and the interval (1 − alpha) use it. */
  alpha: number;
}

export interface LookRecord {
  look: number;
  seeds: number;
  alpha: number;
  spent: number;
  /** Comparisons still open after this look, and those that stopped at it. */
  open: string[];
  stopped: string[];
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

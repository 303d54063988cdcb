import { CanaryAuditError, EXIT_BAD_INPUT, EXIT_FAILURE } from '../errors.js';

/**
 * What went wrong loading a dataset, in the terms a user acts on. Every failure but the network's
 * is bad input (exit 2): the grid's source, a file, or access to the repository needs fixing.
 */
export type DatasetFailure =
  /** The source spec itself: neither or both of repo and path, no such local path, unknown config, bad format, a `files` entry that cannot apply. */
  | 'bad-source'
  /** The Hub has no dataset of that name (404). */
  | 'repo-not-found'
  /** The dataset exists; the revision (branch, tag, sha) does not. */
  | 'revision-not-found'
  /** Gated or private: 401 without a token, 403 with one that has no access. */
  | 'unauthorized'
  /** The Hub cannot be reached (or HF_HUB_OFFLINE is set) and the local cache lacks what is needed. */
  | 'not-cached'
  /** The Hub failed in the middle of a download. */
  | 'unreachable'
  /** A data file (or the dataset card) cannot be read or parsed. */
  | 'bad-file'
  /** A split asked for has no files. */
  | 'missing-split'
  /** A split asked for has files but no rows. */
  | 'empty-split';

export const DATASET_ERROR_CODES: Record<DatasetFailure, string> = {
  'bad-source': 'E_DATASET_SOURCE',
  'repo-not-found': 'E_DATASET_REPO',
  'revision-not-found': 'E_DATASET_REVISION',
  unauthorized: 'E_DATASET_ACCESS',
  'not-cached': 'E_DATASET_NOT_CACHED',
  unreachable: 'E_DATASET_UNREACHABLE',
  'bad-file': 'E_DATASET_FILE',
  'missing-split': 'E_DATASET_SPLIT',
  'empty-split': 'E_DATASET_EMPTY_SPLIT',
};

export interface DatasetErrorDetails {
  /**
   * The field of the task's source the fix goes in, relative to the task entry of the grid
   * (`source.revision`, `source.files.test`, ...), for the caller to point at its grid location.
   */
  field?: string;
  /** The file concerned, as on disk (local) or as in the repository (hub). */
  file?: string;
  /** The split concerned. */
  split?: string;
  cause?: unknown;
}

/**
 * One line naming the dataset, the file or split, and the fix. The message carries no field
 * prefix: a caller that knows the grid location wraps it (UserInputError with location and
 * `field`).
 */
export class DatasetError extends CanaryAuditError {
  readonly failure: DatasetFailure;
  readonly field: string | undefined;
  readonly file: string | undefined;
  readonly split: string | undefined;

  constructor(failure: DatasetFailure, message: string, details: DatasetErrorDetails = {}) {
    const exitCode = failure === 'not-cached' || failure === 'unreachable' ? EXIT_FAILURE : EXIT_BAD_INPUT;
    super(DATASET_ERROR_CODES[failure], message, { exitCode, cause: details.cause });
    this.name = 'DatasetError';
    this.failure = failure;
    this.field = details.field;
    this.file = details.file;
    this.split = details.split;
  }
}

/** A file that cannot be read or parsed: `<file>: <what>` plus the fix. */
export function badFile(file: string, what: string, details: Omit<DatasetErrorDetails, 'file'> = {}): DatasetError {
  return new DatasetError('bad-file', `${file}: ${what}`, { ...details, file });
}

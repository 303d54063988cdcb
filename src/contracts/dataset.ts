/**
 * Rows a dataset-backed task reads, already loaded: planning is synchronous and never touches
 * the disk or the Hub for them. `src/datasets/` loads a `TaskData` (local files or a Hub dataset
 * repository pinned to a commit) and the app layer hands it to the task at plan time.
 */
export type DatasetRecord = Record<string, unknown>;

/** One file a split was read from, as the manifest records it. */
export interface DatasetFile {
  /** The split it belongs to (train, test, ...). */
  split: string;
  /** Path inside the repository (hub) or as resolved on disk (local). */
  path: string;
  sha256: string;
  bytes: number;
}

/** Where the rows came from: enough to fetch exactly the same bytes again. */
export interface DatasetProvenance {
  source: 'hub' | 'local';
  /** hub: the repository id, e.g. PolyAI/banking77. */
  repo?: string;
  /** hub: the revision the grid names (main when it names none). */
  revision?: string;
  /** hub: the commit sha that revision resolved to at plan time. */
  sha?: string;
  /** hub: the dataset config (subset), null for the default. */
  config?: string | null;
  /** local: the file or folder the grid names, absolute. */
  path?: string;
  files: DatasetFile[];
}

/** A class-label column: index i is called names[i] (the dataset card's `class_label.names`). */
export interface DatasetFeature {
  names?: string[];
}

export interface TaskData {
  /** Records per split name, in file order (files in name order). */
  splits: Record<string, DatasetRecord[]>;
  /** Features the dataset card declares, by column name (class labels only, for now). */
  features: Record<string, DatasetFeature>;
  provenance: DatasetProvenance;
  /**
   * In memory only (never in a manifest): the folder the dataset's files lie in (a local folder, or
   * the Hub snapshot in the cache), so a record naming an image file by path can be read.
   */
  root?: string;
  /** In memory only: per split, the files its records came from, in order, with their record counts. */
  recordFiles?: Record<string, { path: string; records: number }[]>;
}

export type DatasetFormat = 'jsonl' | 'csv' | 'parquet' | 'json';

/**
 * A task's `source` as the grid writes it: a Hub dataset repository (`repo`, optional `revision`,
 * `config`) or a local file or folder (`path`, relative to the grid file). `files` maps a split to
 * its file(s) (globs allowed, e.g. `data/train-*`) when the card or the names do not say;
 * `format` overrides the one the file names imply.
 */
export interface DatasetSourceSpec {
  repo?: string;
  revision?: string;
  config?: string;
  path?: string;
  files?: Record<string, string | string[]>;
  format?: DatasetFormat;
}

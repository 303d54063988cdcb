/**
 * Dataset loading: a task's `source` (a Hub dataset repository pinned to a commit, or a local file
 * or folder) into the `TaskData` the task plans from. Formats: JSON Lines, JSON, CSV, Parquet.
 */
export { loadTaskData, type LoadOptions } from './load.js';
export {
  pinDataset,
  fetchDataset,
  datasetFetchCommand,
  type DatasetHubOptions,
  type DatasetRequest,
  type FetchedDataset,
  type CachedDatasetFile,
} from './hub.js';
export { DatasetError, DATASET_ERROR_CODES, type DatasetFailure, type DatasetErrorDetails } from './errors.js';
export { parseCard, chooseConfig, cardFeatures, type DatasetCard, type CardConfig } from './card.js';
export { resolveSplits, byNames, SPLIT_KEYWORDS, type SplitFiles, type SplitRequest } from './splits.js';
export { readDataFile, formatOfName, FORMATS, type ReadFile } from './formats.js';
export { parseCsv, csvRecords, type CsvRow } from './csv.js';
export { globToRegExp, matchGlob, isGlob } from './glob.js';

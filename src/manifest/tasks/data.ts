/** The dataset contract lives in contracts/ (the grid and the manifest use it too). */
export type { DatasetFeature, DatasetFile, DatasetFormat, DatasetProvenance, DatasetRecord, DatasetSourceSpec, TaskData } from '../../contracts/dataset.js';

export { loadGrid, parseGrid, MAX_EXHAUSTIVE, type LoadedGrid } from './load.js';
export { expandGrid, type Expansion } from './expand.js';
export { designsTogether, togetherProblem } from './designs-together.js';
export { PLACEMENT_PRESETS, AXIS_DEFAULTS } from './axes.js';
export { BUILTIN_MODELS } from './models.js';
export { PRETRAIN_DEFAULTS, describePretrain, pretrainRows } from './pretrain.js';
export { codeSpaceOf } from './code-space.js';
export { GridSource, formatPath, type GridPath } from './source.js';
export * from './types.js';
export {
  singleRunComparisons,
  comparisonText,
  jointSeeds,
  replicateKey,
  type SingleRunComparison,
} from './replicates.js';
export {
  replicationDesign,
  designSentence,
  designLine,
  sequentialText,
  ONE_BASE_INIT_SEED,
  type SequentialReplicates,
  type ReplicationDesign,
  type SeedVariation,
  type DesignPopulation,
} from './design.js';

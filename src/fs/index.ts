export { writeFileAtomic, writeJsonAtomic } from './atomic.js';
export { syncPaths, type SyncMethod, type SyncOptions } from './durable.js';
export { readJsonFile, jsonErrorOffset } from './json-file.js';
export { explainWriteError } from './write-error.js';
export {
  ArtifactPathError,
  checkOutputInsideArtifacts,
  checkTreeInsideArtifacts,
  resolveInsideArtifacts,
  toArtifactRelative,
} from './artifact-path.js';

export { controllerStamp, finishProvenance, hashTree, stampsDiffer } from './stamp.js';
export type { Provenance, Stamp } from './stamp.js';

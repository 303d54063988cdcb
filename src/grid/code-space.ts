import type { CodeSpace } from '../codes/index.js';
import type { GridDocument } from './types.js';

/** The grid's code space (alphabet and length of every canary code). */
export function codeSpaceOf(doc: Pick<GridDocument, 'canaries'>): CodeSpace {
  return { alphabet: doc.canaries.code.alphabet, length: doc.canaries.code.length };
}

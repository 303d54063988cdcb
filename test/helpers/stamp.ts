import type { Stamp } from '../../src/provenance/index.js';

/** A fixed controller provenance stamp for plans made in tests (no git, a fixed time). */
export const STAMP = {
  component: 'controller',
  git_commit: null,
  git_dirty: null,
  code_sha256: '0'.repeat(64),
  versions: {},
  host: 'test',
  time: '2020-01-01T00:00:00.000Z',
} as const satisfies Stamp;

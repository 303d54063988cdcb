import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileAtomic } from '../../src/fs/atomic.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

const root = tempDir('atomic');
afterAll(() => removeDir(root));

describe('writeFileAtomic', () => {
  it('creates a secret with its mode from the start, whatever the umask (no chmod after the rename)', async () => {
    const saved = process.umask(0);
    try {
      await writeFileAtomic(join(root, 'secret'), 'pw\n', { mode: 0o600 });
      await writeFileAtomic(join(root, 'plain'), 'x\n');
    } finally {
      process.umask(saved);
    }
    expect(statSync(join(root, 'secret')).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, 'plain')).mode & 0o777).toBe(0o666);
    expect(readFileSync(join(root, 'secret'), 'utf8')).toBe('pw\n');
  });
});

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { UserInputError } from '../errors.js';

/**
 * Read one score file: float32 little-endian, one natural-log score per candidate, in candidate
 * order. Its length and sha256 are checked against result.json before any score is trusted: a
 * truncated or rewritten file would otherwise yield a plausible, wrong rank.
 */
export async function readScoreFile(path: string, expected: { n: number; sha256: string }): Promise<Float32Array> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    throw new UserInputError(`score file cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)}); the run's output is incomplete — rerun it`, {
      location: { file: path },
      code: 'E_BAD_SCORES',
      cause: error,
    });
  }
  if (bytes.length !== expected.n * 4) {
    throw new UserInputError(
      `score file holds ${bytes.length} bytes but result.json promises ${expected.n} float32 scores (${expected.n * 4} bytes): truncated or from another candidate space — rerun the run's evaluation`,
      { location: { file: path }, code: 'E_BAD_SCORES' },
    );
  }
  const sha = createHash('sha256').update(bytes).digest('hex');
  if (sha !== expected.sha256) {
    throw new UserInputError(`score file sha256 ${sha.slice(0, 12)}… differs from scores_sha256 ${expected.sha256.slice(0, 12)}… in result.json: the file changed after it was written — rerun the run's evaluation`, {
      location: { file: path },
      code: 'E_BAD_SCORES',
    });
  }
  const scores = new Float32Array(expected.n);
  // Explicit little-endian reads: correct on any host, and the copy is aligned whatever the
  // Buffer's offset in its pool.
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < expected.n; i += 1) scores[i] = view.getFloat32(i * 4, true);
  return scores;
}

import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';
import { UserInputError } from '../errors.js';

/**
 * Read one score file: float32 little-endian, one natural-log score per candidate, in candidate
 * order. Its length and sha256 are checked against result.json before any score is trusted: a
 * truncated or rewritten file would otherwise yield a plausible, wrong rank.
 */
const SCORE_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

export async function readScoreFile(path: string, expected: { n: number; sha256: string }): Promise<Float32Array> {
  const want = expected.n * 4;
  // One buffer kept for the next file: a report reads tens of thousands of 40 kB files, and a
  // fresh Buffer each (readFile) made as much garbage as the files hold. One byte more than
  // promised is asked for, so a longer file is caught without an fstat.
  const buffer = takeBuffer(want + 1);
  try {
    let got: number;
    // Synchronous reads: an asynchronous open/read/close costs ~5x the CPU of these three system
    // calls (measured: 86-134 vs 18 us per 40 kB file), and a report is bound by that CPU time.
    let fd: number | undefined;
    try {
      // The read boundary's open (src/fs/read-boundary.ts), kept to two system calls more: no
      // final symlink (the trainer writes regular files), no wait on a FIFO, a regular file.
      fd = openSync(path, SCORE_FLAGS);
      if (!fstatSync(fd).isFile()) {
        throw new UserInputError(
          "score file is not a regular file (a FIFO, a device or a folder); not read — rerun the run's evaluation",
          { location: { file: path }, code: 'E_BAD_SCORES' },
        );
      }
      got = readFully(fd, buffer, want + 1);
    } catch (error) {
      if (error instanceof UserInputError) throw error;
      if ((error as NodeJS.ErrnoException).code === 'ELOOP') {
        throw new UserInputError(
          "score file is a symlink; the trainer writes regular files, so it is not read — rerun the run's evaluation",
          { location: { file: path }, code: 'E_BAD_SCORES', cause: error },
        );
      }
      throw new UserInputError(
        `score file cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)}); the run's output is incomplete — rerun it`,
        {
          location: { file: path },
          code: 'E_BAD_SCORES',
          cause: error,
        },
      );
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
    if (got !== want) {
      const size = got > want ? `more than ${want} bytes` : `${got} bytes`;
      throw new UserInputError(
        `score file holds ${size} but result.json promises ${expected.n} float32 scores (${want} bytes): truncated or from another candidate space — rerun the run's evaluation`,
        { location: { file: path }, code: 'E_BAD_SCORES' },
      );
    }
    const bytes = buffer.subarray(0, want);
    const sha = createHash('sha256').update(bytes).digest('hex');
    if (sha !== expected.sha256) {
      throw new UserInputError(
        `score file sha256 ${sha.slice(0, 12)}… differs from scores_sha256 ${expected.sha256.slice(0, 12)}… in result.json: the file changed after it was written — rerun the run's evaluation`,
        {
          location: { file: path },
          code: 'E_BAD_SCORES',
        },
      );
    }
    const scores = new Float32Array(expected.n);
    if (LITTLE_ENDIAN) {
      // The buffer starts its own ArrayBuffer (aligned): one copy of the bytes as they are.
      scores.set(new Float32Array(bytes.buffer, bytes.byteOffset, expected.n));
    } else {
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      for (let i = 0; i < expected.n; i += 1) scores[i] = view.getFloat32(i * 4, true);
    }
    return scores;
  } finally {
    spare.push(buffer);
  }
}

const LITTLE_ENDIAN = endianness() === 'LE';
const spare: Buffer[] = [];

function takeBuffer(size: number): Buffer {
  const kept = spare.pop();
  // allocUnsafeSlow: its own ArrayBuffer at offset 0, so a Float32Array view of it is aligned.
  return kept !== undefined && kept.length >= size ? kept : Buffer.allocUnsafeSlow(Math.max(size, kept?.length ?? 0));
}

function readFully(fd: number, buffer: Buffer, size: number): number {
  let at = 0;
  while (at < size) {
    const got = readSync(fd, buffer, at, size - at, at);
    if (got === 0) break;
    at += got;
  }
  return at;
}

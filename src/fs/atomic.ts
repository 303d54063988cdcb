import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname, basename, join } from 'node:path';

export interface AtomicWriteOptions {
  /** File mode the temporary file is created with (before the umask), so a secret is never
   * readable by others, not even for a moment. Default 0o666 (0644 under the usual umask). */
  mode?: number;
}

/**
 * Write a file atomically: write a temporary sibling, fsync it, then rename over the target.
 * A reader sees the old content or the new, never a partial file, even if the process dies.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  options: AtomicWriteOptions = {},
): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const handle = await open(tmp, 'wx', options.mode ?? 0o666);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw error;
  }
  await handle.close();
  try {
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

/** Atomic JSON write, two-space indented, trailing newline. */
export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
}

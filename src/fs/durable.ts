import { execFile } from 'node:child_process';
import { open } from 'node:fs/promises';

/**
 * Make many files and folders durable at once, instead of an fsync as each is written: one
 * syncfs(2) of the file system that holds them (`sync -f`, GNU coreutils 8.24 or later: Linux),
 * which writes back every dirty page of that file system and commits its journal in one call. Where
 * that is missing or fails (another system, an old coreutils, an I/O error), every path is fsynced
 * (a folder too, which makes its entries durable), a few at a time; a real I/O error then surfaces
 * from that file's own fsync, with its path.
 *
 * `paths` must all lie on the file system of `paths[0]`; folders among them are fsynced for the
 * entries they hold (new files, renames into them).
 */
export async function syncPaths(paths: readonly string[], options: SyncOptions = {}): Promise<SyncMethod | null> {
  const first = paths[0];
  if (first === undefined) return null;
  if ((options.syncfs ?? true) && (await syncFileSystem(first))) return 'syncfs';
  await fsyncEach(paths);
  return 'fsync';
}

export interface SyncOptions {
  /** Try one syncfs of the whole file system first (default true); false fsyncs each path. */
  syncfs?: boolean;
}

/** How `syncPaths` made the paths durable. */
export type SyncMethod = 'syncfs' | 'fsync';

/** Paths fsynced at once when each is synced: enough to fill libuv's thread pool (4) and the disk's queue. */
const FSYNC_LANES = 16;

/** Known not to work on this machine once it failed: the rest of the process fsyncs each path. */
let syncfsMissing = false;

function syncFileSystem(path: string): Promise<boolean> {
  if (syncfsMissing || process.platform !== 'linux') return Promise.resolve(false);
  return new Promise((resolve) => {
    execFile('sync', ['-f', path], { timeout: 600_000 }, (error) => {
      if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') syncfsMissing = true;
      resolve(!error);
    });
  });
}

async function fsyncEach(paths: readonly string[]): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let i = next++; i < paths.length; i = next++) {
      const path = paths[i] as string;
      const handle = await open(path, 'r');
      try {
        // Node's fsync error names no path: the file's, for the one-line explanation of a write.
        await handle.sync().catch((error: NodeJS.ErrnoException) => {
          throw Object.assign(error, { path: error.path ?? path });
        });
      } finally {
        await handle.close();
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(FSYNC_LANES, paths.length) }, lane));
}

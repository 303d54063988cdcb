import { closeSync, constants, fstatSync, openSync, readlinkSync, readSync, realpathSync, type Stats } from 'node:fs';
import { open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { CanaryAuditError } from '../errors.js';

/**
 * The one way the controller reads a file it did not write in this process and that an audit or a
 * dataset names (a report, a trainer log, a dataset image, a run's manifest or result): the file
 * must lie inside `root` once every symlink is resolved, be a regular file (not a FIFO, a device,
 * a directory) and hold at most `maxBytes`. It is opened once and every check after the open is
 * made on that handle, so nothing can be swapped between the check and the read:
 *  - realpath first, refused outside the root's realpath;
 *  - open with O_NOFOLLOW (the last component cannot have become a link) and O_NONBLOCK (opening
 *    a FIFO does not wait for a writer);
 *  - fstat the handle: a regular file, at most maxBytes;
 *  - on Linux, /proc/self/fd/N names what was really opened: refused when it is outside the root
 *    (a folder on the way swapped for a link between realpath and open);
 *  - read from the handle, at most maxBytes + 1 bytes (a file that grows past the cap is refused).
 */
export interface ReadBoundaryOptions {
  /** Largest file accepted, bytes. */
  maxBytes: number;
  /** What the file is, for messages ("report", "dataset image"). Default "file". */
  what?: string;
  /** The fix printed after a refusal; default: replace the file with a regular file inside the root. */
  fix?: string;
}

export class ReadBoundaryError extends CanaryAuditError {
  readonly path: string;
  constructor(path: string, message: string, cause?: unknown) {
    super('E_READ_BOUNDARY', message, { exitCode: 2, cause });
    this.name = 'ReadBoundaryError';
    this.path = path;
  }
}

const FLAGS =
  constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);
const PROC_FD = process.platform === 'linux';

/** Bytes for messages: 805 bytes, 1.5 MB, 2.0 GB. */
export function formatBytes(n: number): string {
  if (n < 1e3) return `${n} bytes`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(1)} GB`;
}

function isWithin(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

function kindOf(stat: Stats): string {
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO (named pipe)';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isSocket()) return 'a socket';
  return 'not a regular file';
}

interface Checked {
  full: string;
  real: string;
  realRoot: string;
}

function label(options: ReadBoundaryOptions): string {
  return options.what ?? 'file';
}

function fixOf(options: ReadBoundaryOptions, realRoot: string): string {
  return options.fix ?? `replace it with a regular file inside ${realRoot}`;
}

function refuseRealpath(full: string, error: unknown, options: ReadBoundaryOptions): never {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT')
    throw new ReadBoundaryError(
      full,
      `${full}: no such ${label(options)}${options.fix ? `; ${options.fix}` : ''}`,
      error,
    );
  if (code === 'ELOOP')
    throw new ReadBoundaryError(
      full,
      `${full}: ${label(options)} is a symlink loop; not read — ${options.fix ?? 'point the link at a regular file'}`,
      error,
    );
  throw new ReadBoundaryError(
    full,
    `${full}: ${label(options)} cannot be read (${code ?? String(error)}); ${options.fix ?? `make it and its folders readable by this user (ls -ld ${full})`}`,
    error,
  );
}

function checkPath(root: string, path: string, realRoot: string, real: string, options: ReadBoundaryOptions): Checked {
  const full = resolve(root, path);
  if (!isWithin(resolve(root), full) && !isWithin(realRoot, full)) {
    throw new ReadBoundaryError(full, `${full}: ${label(options)} lies outside ${realRoot}; not read`);
  }
  if (!isWithin(realRoot, real)) {
    throw new ReadBoundaryError(
      full,
      `${full}: ${label(options)} resolves (through a symlink) to ${real}, outside ${realRoot}; not read — ${fixOf(options, realRoot)}`,
    );
  }
  return { full, real, realRoot };
}

function checkStat(c: Checked, stat: Stats, opened: string | null, options: ReadBoundaryOptions): void {
  if (opened !== null && !isWithin(c.realRoot, opened)) {
    throw new ReadBoundaryError(
      c.full,
      `${c.full}: ${label(options)} opened as ${opened}, outside ${c.realRoot} (a folder on its path changed while it was opened); not read`,
    );
  }
  if (!stat.isFile()) {
    throw new ReadBoundaryError(
      c.full,
      `${c.full}: ${label(options)} is ${kindOf(stat)}, not a regular file; not read — ${fixOf(options, c.realRoot)}`,
    );
  }
  if (stat.size > options.maxBytes) {
    throw new ReadBoundaryError(
      c.full,
      `${c.full}: ${label(options)} holds ${formatBytes(stat.size)}, over the ${formatBytes(options.maxBytes)} cap; not read`,
    );
  }
}

function refuseOpen(c: Checked, error: unknown, options: ReadBoundaryOptions): never {
  const code = (error as NodeJS.ErrnoException).code;
  // O_NOFOLLOW: the path realpath gave became a symlink before the open.
  if (code === 'ELOOP')
    throw new ReadBoundaryError(
      c.full,
      `${c.full}: ${label(options)} became a symlink while it was opened; not read`,
      error,
    );
  throw new ReadBoundaryError(
    c.full,
    `${c.full}: ${label(options)} cannot be opened (${code ?? String(error)})`,
    error,
  );
}

/** More bytes than fstat promised: the file is being written; a partial read is not a file. */
function grew(full: string, options: ReadBoundaryOptions): never {
  throw new ReadBoundaryError(
    full,
    `${full}: ${label(options)} grew while it was read (is it still being written?); not read — read it again once it is complete`,
  );
}

/** An open, checked file: its handle and size (the caller closes it). */
export interface BoundedHandle {
  handle: FileHandle;
  size: number;
  /** The path as resolved against the root (for messages). */
  path: string;
}

/** Open `path` (relative to `root`, or absolute inside it) through the boundary; the caller reads and closes. */
export async function openInside(root: string, path: string, options: ReadBoundaryOptions): Promise<BoundedHandle> {
  const full = resolve(root, path);
  let realRoot: string;
  let real: string;
  try {
    realRoot = await realpath(root);
    real = await realpath(full);
  } catch (error) {
    return refuseRealpath(full, error, options);
  }
  const c = checkPath(root, path, realRoot, real, options);
  let handle: FileHandle;
  try {
    handle = await open(real, FLAGS);
  } catch (error) {
    return refuseOpen(c, error, options);
  }
  try {
    const opened = PROC_FD ? await readlink(`/proc/self/fd/${handle.fd}`).catch(() => null) : null;
    const stat = await handle.stat();
    checkStat(c, stat, opened, options);
    return { handle, size: stat.size, path: c.full };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** The whole file at `path` through the boundary (see the module comment). */
export async function readInside(
  root: string,
  path: string,
  options: ReadBoundaryOptions,
): Promise<Buffer<ArrayBuffer>> {
  const { handle, size, path: full } = await openInside(root, path, options);
  try {
    const buffer = Buffer.alloc(Math.min(size, options.maxBytes) + 1);
    let got = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, got, buffer.length - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
      if (got === buffer.length) grew(full, options);
    }
    return buffer.subarray(0, got);
  } finally {
    await handle.close();
  }
}

/** readInside, synchronously (for callers on a synchronous path, such as plan's dataset images). */
export function readInsideSync(root: string, path: string, options: ReadBoundaryOptions): Buffer<ArrayBuffer> {
  const full = resolve(root, path);
  let realRoot: string;
  let real: string;
  try {
    realRoot = realpathSync(root);
    real = realpathSync(full);
  } catch (error) {
    return refuseRealpath(full, error, options);
  }
  const c = checkPath(root, path, realRoot, real, options);
  let fd: number;
  try {
    fd = openSync(real, FLAGS);
  } catch (error) {
    return refuseOpen(c, error, options);
  }
  try {
    let opened: string | null = null;
    if (PROC_FD) {
      try {
        opened = readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        opened = null;
      }
    }
    const stat = fstatSync(fd);
    checkStat(c, stat, opened, options);
    const buffer = Buffer.alloc(Math.min(stat.size, options.maxBytes) + 1);
    let got = 0;
    for (;;) {
      const n = readSync(fd, buffer, got, buffer.length - got, got);
      if (n === 0) break;
      got += n;
      if (got === buffer.length) grew(c.full, options);
    }
    return buffer.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

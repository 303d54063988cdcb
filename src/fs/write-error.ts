import { accessSync, constants, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { CanaryAuditError } from '../errors.js';

/**
 * A file-system error while writing user-visible artifacts, as one line that names the path and
 * the fix (exit 1). Node's ENOSPC from a stream write names no path: `where` (the folder being
 * written) stands in. A recursive mkdir on a read-only file system says ENOENT: the folder that
 * exists above it is asked (EROFS, EACCES) and named instead. Errors that are not file-system errors come back as null.
 */
const FIXES: Record<string, [string, string]> = {
  ENOSPC: ['no space left on the device', 'free space there or choose another folder'],
  EDQUOT: ['disk quota exceeded', 'free space within your quota or choose another folder'],
  EACCES: ['permission denied', "fix the folder's permissions (or owner) or choose another folder"],
  EPERM: ['operation not permitted', "fix the folder's permissions (or owner) or choose another folder"],
  EROFS: ['read-only file system', 'choose a writable folder'],
  ENOTDIR: ['a path component is a file, not a folder', 'remove or rename that file, or choose another folder'],
  EISDIR: ['a folder stands where a file should be written', 'remove it, or choose another folder'],
  EMFILE: ['too many open files', 'raise the open-file limit (ulimit -n) and retry'],
};

export function explainWriteError(error: unknown, where: string, what = 'write'): CanaryAuditError | null {
  const e = error as NodeJS.ErrnoException;
  let code = e?.code;
  let path = e?.path ?? where;
  if (code === 'ENOENT' && e.syscall === 'mkdir' && typeof e.path === 'string') {
    // A recursive mkdir on a read-only (or unwritable) file system reports ENOENT for the folder
    // it could not create: ask the deepest folder that exists what is really wrong.
    const real = mkdirBlocker(e.path);
    if (real) [code, path] = real;
  }
  const known = typeof code === 'string' ? FIXES[code] : undefined;
  if (!known) return null;
  return new CanaryAuditError(
    `E_${code}`,
    `cannot ${what}${path ? ` ${path}` : ''}: ${known[0]} (${code}); ${known[1]}`,
    { cause: error },
  );
}

/** The error that stops creating folders under the deepest existing ancestor of `path`, if any. */
function mkdirBlocker(path: string): [string, string] | null {
  let dir = resolve(path);
  while (!existsSync(dir)) {
    const up = dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
  try {
    accessSync(dir, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return typeof code === 'string' ? [code, dir] : null;
  }
  return null;
}

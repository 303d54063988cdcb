import { CanaryAuditError } from '../errors.js';

/**
 * A file-system error while writing user-visible artifacts, as one line that names the path and
 * the fix (exit 1). Node's ENOSPC from a stream write names no path: `where` (the folder being
 * written) stands in. Errors that are not file-system errors come back as null.
 */
const FIXES: Record<string, [string, string]> = {
  ENOSPC: ['no space left on the device', 'free space there or choose another folder'],
  EDQUOT: ['disk quota exceeded', 'free space within your quota or choose another folder'],
  EACCES: ['permission denied', 'fix the folder\'s permissions (or owner) or choose another folder'],
  EPERM: ['operation not permitted', 'fix the folder\'s permissions (or owner) or choose another folder'],
  EROFS: ['read-only file system', 'choose a writable folder'],
  ENOTDIR: ['a path component is a file, not a folder', 'remove or rename that file, or choose another folder'],
  EISDIR: ['a folder stands where a file should be written', 'remove it, or choose another folder'],
  EMFILE: ['too many open files', 'raise the open-file limit (ulimit -n) and retry'],
};

export function explainWriteError(error: unknown, where: string, what = 'write'): CanaryAuditError | null {
  const e = error as NodeJS.ErrnoException;
  const known = typeof e?.code === 'string' ? FIXES[e.code] : undefined;
  if (!known) return null;
  const path = e.path ?? where;
  return new CanaryAuditError(`E_${e.code}`, `cannot ${what} ${path}: ${known[0]} (${e.code}); ${known[1]}`, { cause: error });
}

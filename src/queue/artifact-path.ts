import { realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { CanaryAuditError } from '../errors.js';

/**
 * Job data names files relative to the artifact root, and a worker resolves them against its own
 * root. A path that would land outside the root (absolute, `..`, or a symlink pointing away) is
 * refused: a job in a shared Redis must not make a GPU host read or write arbitrary files.
 */
export class ArtifactPathError extends CanaryAuditError {
  constructor(message: string) {
    super('E_ARTIFACT_PATH', message, { exitCode: 2 });
    this.name = 'ArtifactPathError';
  }
}

export function resolveInsideArtifacts(artifactsDir: string, relPath: string): string {
  if (typeof relPath !== 'string' || relPath === '') {
    throw new ArtifactPathError(`job names no artifact path (got ${JSON.stringify(relPath)})`);
  }
  if (isAbsolute(relPath) || relPath.includes('\0')) {
    throw new ArtifactPathError(`artifact path ${JSON.stringify(relPath)} must be relative to the artifact root`);
  }
  const root = resolve(artifactsDir);
  const full = resolve(root, relPath);
  if (!isWithin(root, full)) {
    throw new ArtifactPathError(`artifact path ${JSON.stringify(relPath)} leaves the artifact root ${root}`);
  }
  // Follow symlinks of whatever exists: a link inside the root must not lead out of it.
  const realRoot = safeRealpath(root);
  const realFull = safeRealpath(full);
  if (realRoot !== null && realFull !== null && !isWithin(realRoot, realFull)) {
    throw new ArtifactPathError(`artifact path ${JSON.stringify(relPath)} resolves (through a symlink) outside the artifact root ${realRoot}`);
  }
  return full;
}

/** The path of `absPath` relative to the artifact root, POSIX separators (what job data stores). */
export function toArtifactRelative(artifactsDir: string, absPath: string): string {
  const root = resolve(artifactsDir);
  const full = resolve(absPath);
  if (!isWithin(root, full)) {
    throw new ArtifactPathError(`${full} is not inside the artifact root ${root}`);
  }
  return relative(root, full).split(sep).join('/');
}

function isWithin(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

function safeRealpath(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

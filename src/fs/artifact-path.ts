import { lstatSync, readdirSync, realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
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
  // Follow the symlinks of every component that exists (the path itself may not exist yet):
  // a link inside the root must not lead out of it.
  const realRoot = safeRealpath(root) ?? root;
  if (!isWithin(realRoot, realpathOfExisting(full))) {
    throw new ArtifactPathError(
      `artifact path ${JSON.stringify(relPath)} resolves (through a symlink) outside the artifact root ${realRoot}`,
    );
  }
  return full;
}

/**
 * A run's output folder, where the trainer writes checkpoints, scores and result.json: refused when
 * it, or any symlink in it (two levels deep: checkpoints/, scores/<phase>/), leads out of the root.
 * Checked before anything is written or deleted there.
 */
export function checkOutputInsideArtifacts(artifactsDir: string, outDir: string): void {
  const root = safeRealpath(resolve(artifactsDir)) ?? resolve(artifactsDir);
  resolveInsideArtifacts(artifactsDir, toArtifactRelative(artifactsDir, outDir));
  for (const link of symlinksUnder(outDir, 2)) {
    if (!isWithin(root, realpathOfExisting(link))) {
      throw new ArtifactPathError(
        `${link} is a symlink that leads outside the artifact root ${root}; remove it (the trainer writes there)`,
      );
    }
  }
}

/**
 * A folder the controller reads as a whole (the dashboard's plot reads an audit's manifests,
 * results and score files): refused when it, or any symlink in it (`depth` levels deep), leads out
 * of the root.
 */
export function checkTreeInsideArtifacts(artifactsDir: string, dir: string, depth: number): void {
  const root = safeRealpath(resolve(artifactsDir)) ?? resolve(artifactsDir);
  resolveInsideArtifacts(artifactsDir, toArtifactRelative(artifactsDir, dir));
  for (const link of symlinksUnder(dir, depth)) {
    if (!isWithin(root, realpathOfExisting(link))) {
      throw new ArtifactPathError(`${link} is a symlink that leads outside the artifact root ${root}; not read`);
    }
  }
}

function symlinksUnder(dir: string, depth: number): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const found: string[] = [];
  for (const name of names) {
    const path = join(dir, name);
    const stat = lstatSync(path, { throwIfNoEntry: false });
    if (stat?.isSymbolicLink()) found.push(path);
    else if (stat?.isDirectory() && depth > 1) found.push(...symlinksUnder(path, depth - 1));
  }
  return found;
}

/** realpath of the deepest existing ancestor, plus the components that do not exist yet. */
function realpathOfExisting(path: string): string {
  const real = safeRealpath(path);
  if (real !== null) return real;
  const parent = dirname(path);
  if (parent === path) return path;
  return join(realpathOfExisting(parent), basename(path));
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

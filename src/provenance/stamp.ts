import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, relative } from 'node:path';
import { PACKAGE_ROOT } from '../paths.js';

/**
 * A provenance stamp names the code that produced an artifact. It is taken twice, when work starts
 * and when its artifact is written; `changed_mid_run` says the two disagree (the tree moved while
 * the work ran, so the artifact may come from code that no commit describes).
 */
export interface Stamp {
  component: 'controller' | 'trainer';
  git_commit: string | null;
  git_dirty: boolean | null;
  code_sha256: string;
  versions: Record<string, string>;
  host: string;
  time: string;
}

export interface Provenance {
  at_start: Stamp;
  at_write: Stamp;
  changed_mid_run: boolean;
}

/** Folders whose files define the controller's behaviour. */
const CONTROLLER_CODE = ['src', 'schemas'];

function listFiles(dir: string, out: string[]): void {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) listFiles(full, out);
    else if (entry.isFile()) out.push(full);
  }
}

/** sha256 over the relative paths and contents of the given folders, in sorted order. */
export function hashTree(root: string, folders: string[]): string {
  const files: string[] = [];
  for (const folder of folders) listFiles(join(root, folder), files);
  files.sort();
  const hash = createHash('sha256');
  for (const file of files) {
    hash.update(relative(root, file));
    hash.update('\0');
    hash.update(readFileSync(file));
    hash.update('\0');
  }
  return hash.digest('hex');
}

function git(args: string[]): string | null {
  try {
    return execFileSync('git', args, {
      cwd: PACKAGE_ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return null;
  }
}

function packageVersion(name: string): string | null {
  try {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? null;
  } catch {
    return null;
  }
}

let cachedVersions: Record<string, string> | undefined;

function controllerVersions(): Record<string, string> {
  if (cachedVersions) return cachedVersions;
  const own = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string };
  const versions: Record<string, string> = { 'canary-audit': own.version, node: process.versions.node };
  for (const name of ['bullmq', 'ioredis', 'ajv', 'yaml', 'execa']) {
    const v = packageVersion(name);
    if (v) versions[name] = v;
  }
  cachedVersions = versions;
  return versions;
}

/** Stamp the controller's code as it is on disk now. */
export function controllerStamp(): Stamp {
  const commit = git(['rev-parse', 'HEAD']);
  let dirty: boolean | null = null;
  if (commit !== null) {
    const status = git(['status', '--porcelain', '--', ...CONTROLLER_CODE, 'package.json', 'package-lock.json']);
    dirty = status === null ? null : status.length > 0;
  }
  // src/ is hashed (not dist/): it is what a reader can check out and compare.
  return {
    component: 'controller',
    git_commit: commit,
    git_dirty: dirty,
    code_sha256: hashTree(PACKAGE_ROOT, CONTROLLER_CODE),
    versions: controllerVersions(),
    host: hostname(),
    time: new Date().toISOString(),
  };
}

/** True when two stamps describe different code (time and host are ignored). */
export function stampsDiffer(a: Stamp, b: Stamp): boolean {
  return (
    a.git_commit !== b.git_commit ||
    a.git_dirty !== b.git_dirty ||
    a.code_sha256 !== b.code_sha256 ||
    JSON.stringify(a.versions) !== JSON.stringify(b.versions)
  );
}

/** Close a provenance record: take the write-time stamp and compare it with the start stamp. */
export function finishProvenance(atStart: Stamp, atWrite: Stamp = controllerStamp()): Provenance {
  return { at_start: atStart, at_write: atWrite, changed_mid_run: stampsDiffer(atStart, atWrite) };
}

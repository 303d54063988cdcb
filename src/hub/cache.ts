import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, rename, rm, symlink } from 'node:fs/promises';
import { basename, dirname, join, relative, sep } from 'node:path';
import { writeFileAtomic } from '../fs/index.js';

/**
 * The Hugging Face cache layout, as `huggingface_hub` writes and reads it:
 *
 *   <cache>/models--<org>--<name>/     (datasets--<org>--<name>/ for a dataset repository)
 *     blobs/<etag>                  file contents (etag: sha256 for LFS files, git sha1 otherwise)
 *     snapshots/<commit>/<path>     relative symlink to ../../blobs/<etag> (deeper for subfolders)
 *     refs/<revision>               the commit sha the branch or tag pointed to when fetched
 */
export const COMMIT_SHA = /^[0-9a-f]{40}$/;

/** The kinds of Hub repository fetched here: models (weights) and datasets (training rows). */
export type RepoType = 'model' | 'dataset';

/** The cache of one kind of repository (models unless told otherwise). */
export class HubCache {
  constructor(
    readonly dir: string,
    readonly type: RepoType = 'model',
  ) {}

  repoDir(name: string): string {
    return join(this.dir, `${this.type}s--${name.split('/').join('--')}`);
  }

  snapshotDir(name: string, sha: string): string {
    return join(this.repoDir(name), 'snapshots', sha);
  }

  blobPath(name: string, etag: string): string {
    return join(this.repoDir(name), 'blobs', etag);
  }

  refPath(name: string, revision: string): string {
    return join(this.repoDir(name), 'refs', ...revision.split('/'));
  }

  /** The commit a revision names in the cache (a sha with its snapshot, or a ref's sha), else null. */
  cachedSha(name: string, revision: string): string | null {
    const sha = COMMIT_SHA.test(revision) ? revision : this.readRef(name, revision);
    return sha !== null && existsSync(this.snapshotDir(name, sha)) ? sha : null;
  }

  readRef(name: string, revision: string): string | null {
    try {
      const sha = readFileSync(this.refPath(name, revision), 'utf8').trim();
      return COMMIT_SHA.test(sha) ? sha : null;
    } catch {
      return null;
    }
  }

  async writeRef(name: string, revision: string, sha: string): Promise<void> {
    if (revision === sha) return;
    await writeFileAtomic(this.refPath(name, revision), sha);
  }

  /** The snapshot file resolves to a blob (a symlink whose target exists). */
  hasFile(name: string, sha: string, path: string): boolean {
    try {
      return statSync(join(this.snapshotDir(name, sha), path)).isFile();
    } catch {
      return false;
    }
  }

  /** The files of a cached snapshot whose links resolve, as repository paths in name order. */
  snapshotFiles(name: string, sha: string): string[] {
    const root = this.snapshotDir(name, sha);
    const files: string[] = [];
    const walk = (dir: string, prefix: string): void => {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        return;
      }
      for (const entry of names.sort()) {
        if (entry.startsWith('.')) continue;
        const path = prefix ? `${prefix}/${entry}` : entry;
        try {
          const stat = statSync(join(dir, entry));
          if (stat.isDirectory()) walk(join(dir, entry), path);
          else if (stat.isFile()) files.push(path);
        } catch {
          // a link whose blob is gone: not a cached file
        }
      }
    };
    walk(root, '');
    return files.sort();
  }

  hasBlob(name: string, etag: string): boolean {
    return existsSync(this.blobPath(name, etag));
  }

  /** Point snapshots/<sha>/<path> at blobs/<etag> with a relative symlink, replaced atomically. */
  async link(name: string, sha: string, path: string, etag: string): Promise<void> {
    const pointer = join(this.snapshotDir(name, sha), path);
    await mkdir(dirname(pointer), { recursive: true });
    const target = relative(dirname(pointer), this.blobPath(name, etag)).split(sep).join('/');
    const tmp = join(dirname(pointer), `.${basename(pointer)}.${randomBytes(4).toString('hex')}.tmp`);
    await symlink(target, tmp);
    try {
      await rename(tmp, pointer);
    } catch (error) {
      await rm(tmp, { force: true });
      throw error;
    }
  }
}

/** A repository path from the Hub must stay inside the snapshot folder. */
export function safeRepoPath(path: string): boolean {
  if (path === '' || path.startsWith('/') || path.includes('\\')) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..');
}

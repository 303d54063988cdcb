import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { downloadFile, listFiles, type ListFileEntry } from '@huggingface/hub';
import { CanaryAuditError } from '../errors.js';
import { hubCacheDir } from './env.js';
import { HubCache, safeRepoPath, type RepoType } from './cache.js';
import { hubClient, hubError, remoteCommit, type HubClient, type HubOptions } from './client.js';

/**
 * Fetch a repository snapshot (a model's, or a dataset's) into the Hugging Face cache (layout:
 * cache.ts). Idempotent: a file whose snapshot link resolves is skipped, a blob already present is
 * only linked. Atomic: each blob is written to a temporary sibling, checked against the Hub's hash,
 * then renamed; links and refs are replaced by rename; the ref is written last, so it names a
 * snapshot whose fetched files are all in place.
 */
export interface FetchProgress {
  /** A file of the snapshot: already there, linked to a blob present, or about to download. */
  file?(path: string, size: number, state: 'cached' | 'linked' | 'download'): void;
  /** Bytes of the file being downloaded so far (called per chunk; throttle when drawing). */
  bytes?(path: string, done: number, total: number): void;
}

export interface FetchOptions extends HubOptions {
  /** Cache folder; default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. */
  cacheDir?: string;
  progress?: FetchProgress;
  /** Kind of repository; default model. */
  repoType?: RepoType;
  /** Fetch only the files this accepts (repository paths); default every file. */
  include?: (path: string) => boolean;
}

export interface FetchedSnapshot {
  name: string;
  revision: string;
  sha: string;
  snapshotDir: string;
  files: number;
  /** Files and bytes downloaded by this call (0 when everything was cached). */
  downloadedFiles: number;
  downloadedBytes: number;
}

export async function fetchSnapshot(
  name: string,
  revision: string | null,
  options: FetchOptions = {},
): Promise<FetchedSnapshot> {
  const snapshot = await RemoteSnapshot.open(name, revision, options);
  const paths = snapshot.paths().filter((path) => options.include?.(path) ?? true);
  const got = await snapshot.fetch(paths);
  await snapshot.complete();
  return {
    name,
    revision: snapshot.revision,
    sha: snapshot.sha,
    snapshotDir: snapshot.snapshotDir,
    files: paths.length,
    ...got,
  };
}

/**
 * One commit of a Hub repository, listed but not yet fetched: for callers that choose files from
 * the listing (and from files already fetched, such as a dataset card) before fetching them.
 * `complete()` writes the ref once the chosen files are in place.
 */
export class RemoteSnapshot {
  private constructor(
    readonly type: RepoType,
    readonly name: string,
    readonly revision: string,
    readonly sha: string,
    /** Every file of the commit, as the Hub lists it. */
    readonly entries: ListFileEntry[],
    private readonly cache: HubCache,
    private readonly client: HubClient,
    private readonly progress: FetchProgress,
  ) {}

  /**
   * Resolve `revision` (default main) to its commit and list that commit's files. `sha`, when the
   * caller resolved the revision already, spares the Hub that question (the listing still fails
   * for a commit the Hub does not have).
   */
  static async open(
    name: string,
    revision: string | null,
    options: FetchOptions & { sha?: string } = {},
  ): Promise<RemoteSnapshot> {
    const type = options.repoType ?? 'model';
    const client = hubClient(options);
    const cache = new HubCache(options.cacheDir ?? hubCacheDir(), type);
    const rev = revision ?? 'main';
    const sha = options.sha ?? (await remoteCommit(name, rev, client, type));
    const entries = await snapshotFiles(type, name, sha, client);
    return new RemoteSnapshot(type, name, rev, sha, entries, cache, client, options.progress ?? {});
  }

  get snapshotDir(): string {
    return this.cache.snapshotDir(this.name, this.sha);
  }

  /** The repository paths of the commit's files, in listing order. */
  paths(): string[] {
    return this.entries.map((e) => e.path);
  }

  /** Fetch these files (listed paths) into the cache; what was downloaded. */
  async fetch(paths: string[]): Promise<{ downloadedFiles: number; downloadedBytes: number }> {
    const byPath = new Map(this.entries.map((e) => [e.path, e]));
    const got = { downloadedFiles: 0, downloadedBytes: 0 };
    for (const path of paths) {
      const entry = byPath.get(path);
      if (!entry) throw new CanaryAuditError('E_HUB', `${this.name}@${this.sha} has no file ${JSON.stringify(path)}`);
      const bytes = await fetchFile(
        this.cache,
        this.client,
        { type: this.type, name: this.name, sha: this.sha, entry },
        this.progress,
      );
      if (bytes !== null) {
        got.downloadedFiles += 1;
        got.downloadedBytes += bytes;
      }
    }
    return got;
  }

  /** Make the snapshot folder (an empty repository has one too, as huggingface_hub makes it) and write the ref. */
  async complete(): Promise<void> {
    await mkdir(this.snapshotDir, { recursive: true });
    await this.cache.writeRef(this.name, this.revision, this.sha);
  }
}

async function snapshotFiles(type: RepoType, name: string, sha: string, client: HubClient): Promise<ListFileEntry[]> {
  const files: ListFileEntry[] = [];
  try {
    for await (const entry of listFiles({
      repo: { type, name },
      revision: sha,
      recursive: true,
      hubUrl: client.hubUrl,
      fetch: client.fetch,
    })) {
      if (entry.type !== 'file') continue;
      if (!safeRepoPath(entry.path))
        throw new CanaryAuditError(
          'E_HUB',
          `${name}@${sha} lists a file outside its folder: ${JSON.stringify(entry.path)}`,
        );
      files.push(entry);
    }
  } catch (error) {
    throw error instanceof CanaryAuditError ? error : hubError(error, `the files of ${name}@${sha}`, client, type);
  }
  return files;
}

interface FileRef {
  type: RepoType;
  name: string;
  sha: string;
  entry: ListFileEntry;
}

/** One file into the cache; the bytes downloaded, or null when nothing was downloaded. */
async function fetchFile(
  cache: HubCache,
  client: HubClient,
  ref: FileRef,
  progress: FetchProgress,
): Promise<number | null> {
  const { name, sha, entry } = ref;
  const etag = entry.lfs?.oid ?? entry.oid;
  if (!etag || !/^[0-9a-f]{40,64}$/.test(etag))
    throw new CanaryAuditError('E_HUB', `${name}@${sha}: no hash listed for ${entry.path}`);
  if (cache.hasFile(name, sha, entry.path)) {
    progress.file?.(entry.path, entry.size, 'cached');
    return null;
  }
  if (cache.hasBlob(name, etag)) {
    progress.file?.(entry.path, entry.size, 'linked');
    await cache.link(name, sha, entry.path, etag);
    return null;
  }
  progress.file?.(entry.path, entry.size, 'download');
  const bytes = await downloadBlob(cache.blobPath(name, etag), client, ref, progress);
  await cache.link(name, sha, entry.path, etag);
  return bytes;
}

/** Stream one file to a temporary blob, check its size and hash, then rename it into place. */
async function downloadBlob(
  blobPath: string,
  client: HubClient,
  ref: FileRef,
  progress: FetchProgress,
): Promise<number> {
  const { type, name, sha, entry } = ref;
  const what = `${entry.path} of ${name}@${sha}`;
  let blob: Blob | null;
  try {
    blob = await downloadFile({
      repo: { type, name },
      path: entry.path,
      revision: sha,
      hubUrl: client.hubUrl,
      fetch: client.fetch,
    });
  } catch (error) {
    throw hubError(error, what, client, type);
  }
  if (!blob) throw new CanaryAuditError('E_HUB', `${what} is listed but cannot be downloaded`);
  await mkdir(dirname(blobPath), { recursive: true });
  const tmp = `${blobPath}.${process.pid}.${randomBytes(4).toString('hex')}.incomplete`;
  try {
    const check = new BlobCheck(entry);
    const handle = await open(tmp, 'w');
    try {
      for await (const chunk of blob.stream() as unknown as AsyncIterable<Uint8Array>) {
        check.update(chunk);
        await handle.write(chunk);
        progress.bytes?.(entry.path, check.size, entry.size);
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    check.verify(what);
    await rename(tmp, blobPath);
    return check.size;
  } catch (error) {
    await rm(tmp, { force: true });
    throw fromNetwork(error) ? hubError(error, what, client, type) : error;
  }
}

/** An HTTP status or a failed fetch, as opposed to a local problem such as a full disk. */
function fromNetwork(error: unknown): boolean {
  return (error as { statusCode?: number }).statusCode !== undefined || error instanceof TypeError;
}

/**
 * The Hub's own hash of a file, recomputed while it streams: sha256 of the content for LFS files,
 * the git blob sha1 (`blob <size>\0` + content) for the others.
 */
class BlobCheck {
  size = 0;
  private readonly hash;
  private readonly expected: string;

  constructor(private readonly entry: ListFileEntry) {
    if (entry.lfs) {
      this.hash = createHash('sha256');
      this.expected = entry.lfs.oid;
    } else {
      this.hash = createHash('sha1').update(`blob ${entry.size}\0`);
      this.expected = entry.oid ?? '';
    }
  }

  update(chunk: Uint8Array): void {
    this.size += chunk.byteLength;
    this.hash.update(chunk);
  }

  verify(what: string): void {
    const expectedSize = this.entry.lfs?.size ?? this.entry.size;
    if (this.size !== expectedSize)
      throw new CanaryAuditError(
        'E_HUB',
        `${what}: got ${this.size} bytes, the Hub lists ${expectedSize}; fetch again`,
      );
    const got = this.hash.digest('hex');
    if (got !== this.expected)
      throw new CanaryAuditError(
        'E_HUB',
        `${what}: content hash ${got} differs from the Hub's ${this.expected}; fetch again`,
      );
  }
}

import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { downloadFile, listFiles, type ListFileEntry } from '@huggingface/hub';
import { CanaryAuditError } from '../errors.js';
import { hubCacheDir } from './env.js';
import { HubCache, safeRepoPath } from './cache.js';
import { hubClient, hubError, remoteCommit, type HubClient, type HubOptions } from './client.js';

/**
 * Fetch a model snapshot into the Hugging Face cache (layout: cache.ts). Idempotent: a file whose
 * snapshot link resolves is skipped, a blob already present is only linked. Atomic: each blob is
 * written to a temporary sibling, checked against the Hub's hash, then renamed; links and refs are
 * replaced by rename; the ref is written last, so it names a complete snapshot.
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

export async function fetchSnapshot(name: string, revision: string | null, options: FetchOptions = {}): Promise<FetchedSnapshot> {
  const client = hubClient(options);
  const cache = new HubCache(options.cacheDir ?? hubCacheDir());
  const rev = revision ?? 'main';
  const sha = await remoteCommit(name, rev, client);
  const result: FetchedSnapshot = { name, revision: rev, sha, snapshotDir: cache.snapshotDir(name, sha), files: 0, downloadedFiles: 0, downloadedBytes: 0 };
  for (const entry of await snapshotFiles(name, sha, client)) {
    result.files += 1;
    const bytes = await fetchFile(cache, client, { name, sha, entry }, options.progress ?? {});
    if (bytes !== null) {
      result.downloadedFiles += 1;
      result.downloadedBytes += bytes;
    }
  }
  // An empty repository still gets its (empty) snapshot folder, as huggingface_hub makes one.
  await mkdir(result.snapshotDir, { recursive: true });
  await cache.writeRef(name, rev, sha);
  return result;
}

async function snapshotFiles(name: string, sha: string, client: HubClient): Promise<ListFileEntry[]> {
  const files: ListFileEntry[] = [];
  try {
    for await (const entry of listFiles({ repo: { type: 'model', name }, revision: sha, recursive: true, hubUrl: client.hubUrl, fetch: client.fetch })) {
      if (entry.type !== 'file') continue;
      if (!safeRepoPath(entry.path)) throw new CanaryAuditError('E_HUB', `${name}@${sha} lists a file outside its folder: ${JSON.stringify(entry.path)}`);
      files.push(entry);
    }
  } catch (error) {
    throw error instanceof CanaryAuditError ? error : hubError(error, `the files of ${name}@${sha}`, client);
  }
  return files;
}

interface FileRef {
  name: string;
  sha: string;
  entry: ListFileEntry;
}

/** One file into the cache; the bytes downloaded, or null when nothing was downloaded. */
async function fetchFile(cache: HubCache, client: HubClient, ref: FileRef, progress: FetchProgress): Promise<number | null> {
  const { name, sha, entry } = ref;
  const etag = entry.lfs?.oid ?? entry.oid;
  if (!etag || !/^[0-9a-f]{40,64}$/.test(etag)) throw new CanaryAuditError('E_HUB', `${name}@${sha}: no hash listed for ${entry.path}`);
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
async function downloadBlob(blobPath: string, client: HubClient, ref: FileRef, progress: FetchProgress): Promise<number> {
  const { name, sha, entry } = ref;
  const what = `${entry.path} of ${name}@${sha}`;
  let blob: Blob | null;
  try {
    blob = await downloadFile({ repo: { type: 'model', name }, path: entry.path, revision: sha, hubUrl: client.hubUrl, fetch: client.fetch });
  } catch (error) {
    throw hubError(error, what, client);
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
    throw fromNetwork(error) ? hubError(error, what, client) : error;
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
    if (this.size !== expectedSize) throw new CanaryAuditError('E_HUB', `${what}: got ${this.size} bytes, the Hub lists ${expectedSize}; fetch again`);
    const got = this.hash.digest('hex');
    if (got !== this.expected) throw new CanaryAuditError('E_HUB', `${what}: content hash ${got} differs from the Hub's ${this.expected}; fetch again`);
  }
}

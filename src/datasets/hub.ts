import { existsSync, readlinkSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { DatasetFormat } from '../contracts/index.js';
import {
  fetchCommand,
  hubCacheDir,
  hubClient,
  HubCache,
  HubError,
  hubOffline,
  pinRepo,
  remoteCommit,
  RemoteSnapshot,
  type FetchProgress,
  type HubOptions,
  type RepoPin,
} from '../hub/index.js';
import { chooseConfig, EMPTY_CARD, parseCard, type DatasetCard } from './card.js';
import { DatasetError } from './errors.js';
import { readCardText } from './formats.js';
import { globToRegExp } from './glob.js';
import { resolveSplits } from './splits.js';

/**
 * Hub dataset repositories: pin a revision to its commit, fetch the card and only the files of the
 * splits asked for into the standard Hugging Face cache (datasets--org--name/, where
 * `huggingface_hub` finds them too), or, offline, find them there.
 */
export interface DatasetHubOptions extends HubOptions {
  /** Cache folder; default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. */
  cacheDir?: string;
  /** Do not call the Hub; read the local cache (default: HF_HUB_OFFLINE). */
  offline?: boolean;
  progress?: FetchProgress;
}

/** The command that puts (part of) a dataset into the local cache. */
export function datasetFetchCommand(
  repo: string,
  revision: string | null,
  options: { config?: string | null; splits?: string[] } = {},
): string {
  let cmd = fetchCommand(repo, revision, 'dataset');
  if (options.config) cmd += ` --config ${options.config}`;
  for (const split of options.splits ?? []) cmd += ` --split ${split}`;
  return cmd;
}

/**
 * A dataset revision as a commit sha, as `pinModel` does for models: a 40-hex sha is taken as
 * given; else the Hub answers; when it cannot be reached (or offline) a ref of the local cache
 * does. Failures come as DatasetError: unknown dataset, unknown revision, no access, not cached.
 */
export async function pinDataset(
  repo: string,
  revision: string | null,
  options: DatasetHubOptions = {},
): Promise<RepoPin> {
  try {
    return await pinRepo('dataset', repo, revision, options);
  } catch (error) {
    if (!(error instanceof HubError)) throw error;
    // pinRepo answers `unreachable` only once the cache has no ref either.
    if (error.failure === 'unreachable')
      throw new DatasetError('not-cached', error.message, { field: 'source.repo', cause: error });
    throw await fromHubError(error, repo, revision ?? 'main', options);
  }
}

/** A Hub failure in the terms of a dataset source: which field to fix and how. */
async function fromHubError(
  error: HubError,
  repo: string,
  revision: string,
  options: HubOptions,
): Promise<DatasetError> {
  const client = hubClient(options);
  if (error.failure === 'unauthorized') {
    const also = client.authenticated
      ? ''
      : ' (the Hub also answers 401 for a dataset that does not exist: check the name)';
    return new DatasetError('unauthorized', `${error.message}${also}`, { field: 'source.repo', cause: error });
  }
  if (error.failure === 'unreachable') {
    return new DatasetError(
      'unreachable',
      `${error.message}; try again, or fetch it first: ${datasetFetchCommand(repo, revision)}`,
      { field: 'source.repo', cause: error },
    );
  }
  // 404: the repository, or only the revision? Ask for the repository's default branch.
  let repoExists = false;
  try {
    await remoteCommit(repo, 'HEAD', client, 'dataset');
    repoExists = true;
  } catch {
    repoExists = false;
  }
  if (repoExists) {
    return new DatasetError(
      'revision-not-found',
      `dataset ${JSON.stringify(repo)} has no revision ${JSON.stringify(revision)} on ${client.hubUrl} (HTTP 404); name a branch, tag or commit sha it has (${client.hubUrl}/datasets/${repo}/tree/main lists them), or none for main`,
      { field: 'source.revision', cause: error },
    );
  }
  return new DatasetError(
    'repo-not-found',
    `dataset ${JSON.stringify(repo)} is not on ${client.hubUrl} (HTTP 404); check the name (org/name, as in ${client.hubUrl}/datasets/org/name)`,
    { field: 'source.repo', cause: error },
  );
}

export interface DatasetRequest {
  revision?: string | null;
  config?: string;
  /** Splits to fetch; null: every split of the chosen config. */
  splits: string[] | null;
  files?: Record<string, string | string[]>;
  format?: DatasetFormat;
  /** Globs of files fetched besides the splits' (images records name by path); never parsed. */
  assets?: string[];
}

/** One file of a split, in the cache. */
export interface CachedDatasetFile {
  split: string;
  /** Path inside the repository. */
  path: string;
  /** The snapshot path on disk (a link into blobs/). */
  local: string;
  bytes: number;
}

export interface FetchedDataset {
  repo: string;
  revision: string;
  sha: string;
  /** hub: the Hub said; cache: a ref of the local cache (Hub not asked or unreachable); given: a sha. */
  pinned: RepoPin['source'];
  /** Why the local cache answered instead of the Hub. */
  offlineReason?: string;
  /** The card's config used; null when the card declares none. */
  config: string | null;
  card: DatasetCard;
  snapshotDir: string;
  /** Files per split asked for (every split when none was asked), in name order. */
  splits: Record<string, CachedDatasetFile[]>;
  /** The splits the dataset has (in the cache only, when offline). */
  available: string[];
  files: number;
  downloadedFiles: number;
  downloadedBytes: number;
}

/**
 * Fetch a dataset's card and the files of the splits asked for (only those) at a pinned commit,
 * or find them in the cache when offline or when the Hub cannot be reached. `fallbackToCache:
 * false` (the fetch command) makes an unreachable Hub an error instead.
 */
export async function fetchDataset(
  repo: string,
  request: DatasetRequest,
  options: DatasetHubOptions & { fallbackToCache?: boolean } = {},
): Promise<FetchedDataset> {
  const revision = request.revision ?? 'main';
  const offline = options.offline ?? hubOffline();
  const pin = await pinDataset(repo, revision, { ...options, offline });
  if (pin.source === 'cache' && options.fallbackToCache === false) {
    throw new DatasetError('unreachable', `${pin.reason ?? 'the Hub cannot be reached'}; nothing was fetched`, {
      field: 'source.repo',
    });
  }
  if (pin.source === 'cache' || offline)
    return fromCache(repo, request, pin, pin.reason ?? 'HF_HUB_OFFLINE is set', options);
  let snapshot: RemoteSnapshot;
  try {
    snapshot = await RemoteSnapshot.open(repo, revision, { ...options, repoType: 'dataset', sha: pin.sha });
  } catch (error) {
    if (!(error instanceof HubError)) throw error;
    const cache = new HubCache(options.cacheDir ?? hubCacheDir(), 'dataset');
    if (error.failure === 'unreachable' && options.fallbackToCache !== false && cache.cachedSha(repo, pin.sha))
      return fromCache(repo, request, pin, error.message, options);
    throw await fromHubError(error, repo, revision, options);
  }
  const what = `dataset ${repo}@${revision}`;
  const listing = snapshot.paths();
  const got = { downloadedFiles: 0, downloadedBytes: 0 };
  const fetch = async (paths: string[]): Promise<void> => {
    try {
      const r = await snapshot.fetch(paths);
      got.downloadedFiles += r.downloadedFiles;
      got.downloadedBytes += r.downloadedBytes;
    } catch (error) {
      throw error instanceof HubError ? await fromHubError(error, repo, revision, options) : error;
    }
  };
  let card = EMPTY_CARD;
  if (listing.includes('README.md')) {
    await fetch(['README.md']);
    card = parseCard(readCardText(join(snapshot.snapshotDir, 'README.md')), `README.md of ${repo}@${pin.sha}`);
  }
  const config = chooseConfig(card, request.config, what);
  const resolved = resolveSplits(
    listing,
    { splits: request.splits, files: request.files, config, format: request.format },
    what,
  );
  const paths = [
    ...new Set([...Object.values(resolved.bySplit).flat(), ...assetPaths(listing, request.assets)]),
  ].sort();
  await fetch(paths);
  await snapshot.complete();
  const sizes = new Map(snapshot.entries.map((e) => [e.path, e.lfs?.size ?? e.size]));
  return {
    repo,
    revision,
    sha: pin.sha,
    pinned: pin.source,
    config: config?.name ?? null,
    card,
    snapshotDir: snapshot.snapshotDir,
    splits: cachedFiles(resolved.bySplit, snapshot.snapshotDir, (p) => sizes.get(p) ?? 0),
    available: resolved.available,
    files: paths.length + (listing.includes('README.md') ? 1 : 0),
    ...got,
  };
}

/** The same answer from the local cache alone. */
function fromCache(
  repo: string,
  request: DatasetRequest,
  pin: RepoPin,
  reason: string,
  options: DatasetHubOptions,
): FetchedDataset {
  const cache = new HubCache(options.cacheDir ?? hubCacheDir(), 'dataset');
  const revision = request.revision ?? 'main';
  const snapshotDir = cache.snapshotDir(repo, pin.sha);
  const fetchIt = (splits?: string[]): string =>
    datasetFetchCommand(repo, revision, { config: request.config, splits });
  if (!existsSync(snapshotDir)) {
    throw new DatasetError(
      'not-cached',
      `${reason}; dataset ${repo}@${revision} (${pin.sha}) is not in the local cache ${cache.dir}; fetch it where the Hub is reachable: ${fetchIt(request.splits ?? undefined)}`,
      {
        field: 'source.repo',
      },
    );
  }
  const what = `dataset ${repo}@${revision}`;
  const listing = cache.snapshotFiles(repo, pin.sha);
  const card = listing.includes('README.md')
    ? parseCard(readCardText(join(snapshotDir, 'README.md')), `README.md of ${repo}@${pin.sha}`)
    : EMPTY_CARD;
  const config = chooseConfig(card, request.config, what);
  let resolved;
  try {
    resolved = resolveSplits(
      listing,
      { splits: request.splits, files: request.files, config, format: request.format },
      `the cached ${what}`,
    );
  } catch (error) {
    if (!(error instanceof DatasetError) || error.failure !== 'missing-split' || error.split === undefined) throw error;
    const split = error.split;
    throw new DatasetError(
      'not-cached',
      `${reason}; split ${JSON.stringify(split)} of dataset ${repo}@${revision} is not in the local cache ${cache.dir} (${error.message}); fetch it where the Hub is reachable: ${fetchIt([split])}`,
      { field: 'source.repo', split, cause: error },
    );
  }
  const paths = new Set(Object.values(resolved.bySplit).flat());
  return {
    repo,
    revision,
    sha: pin.sha,
    pinned: pin.source,
    offlineReason: reason,
    config: config?.name ?? null,
    card,
    snapshotDir,
    splits: cachedFiles(resolved.bySplit, snapshotDir, (p) => statSync(join(snapshotDir, p)).size),
    available: resolved.available,
    files: paths.size + (listing.includes('README.md') ? 1 : 0),
    downloadedFiles: 0,
    downloadedBytes: 0,
  };
}

/** The listed files the asset globs match. */
function assetPaths(listing: string[], assets: string[] | undefined): string[] {
  if (!assets || assets.length === 0) return [];
  const patterns = assets.map(globToRegExp);
  return listing.filter((p) => patterns.some((re) => re.test(p)));
}

function cachedFiles(
  bySplit: Record<string, string[]>,
  snapshotDir: string,
  size: (path: string) => number,
): Record<string, CachedDatasetFile[]> {
  return Object.fromEntries(
    Object.entries(bySplit).map(([split, paths]) => [
      split,
      paths.map((path) => ({ split, path, local: join(snapshotDir, path), bytes: size(path) })),
    ]),
  );
}

/** The sha256 a cached LFS file's blob is named by (null for a git-sha1-named blob or a plain file). */
export function blobSha256(local: string): string | null {
  try {
    const name = basename(readlinkSync(local));
    return /^[0-9a-f]{64}$/.test(name) ? name : null;
  } catch {
    return null;
  }
}

import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { isHubId } from '../hub/index.js';
import type { DatasetFeature, DatasetFile, DatasetRecord, DatasetSourceSpec, TaskData } from '../contracts/index.js';
import { cardFeatures, chooseConfig, EMPTY_CARD, parseCard, type DatasetCard } from './card.js';
import { DatasetError } from './errors.js';
import { FORMATS, readCardText, readDataFile, type ReadFile } from './formats.js';
import { blobSha256, fetchDataset, type DatasetHubOptions } from './hub.js';
import { resolveSplits } from './splits.js';

export interface LoadOptions extends DatasetHubOptions {
  /** The grid file's folder: a local `path` is relative to it. */
  gridDir: string;
}

/**
 * The rows of the splits a task asks for, from a Hub dataset (pinned to a commit, fetched into the
 * Hugging Face cache: only the card and those splits' files) or from a local file or folder (read
 * like a Hub snapshot). Every split asked for must exist and hold rows.
 */
export async function loadTaskData(
  source: DatasetSourceSpec,
  splits: string[],
  options: LoadOptions,
  assets: string[] = [],
): Promise<TaskData> {
  checkSource(source);
  return source.repo !== undefined
    ? loadHub(source, source.repo, splits, options, assets)
    : loadLocal(source, source.path as string, splits, options.gridDir);
}

function checkSource(source: DatasetSourceSpec): void {
  if (source.repo !== undefined && source.path !== undefined) {
    throw new DatasetError('bad-source', 'names both a Hub dataset (repo) and a local path; name one of them', {
      field: 'source',
    });
  }
  if (source.repo === undefined && source.path === undefined) {
    throw new DatasetError(
      'bad-source',
      'names no data: give repo (a Hub dataset, org/name) or path (a local file or folder, relative to the grid file)',
      { field: 'source' },
    );
  }
  if (source.repo !== undefined && !isHubId(source.repo)) {
    throw new DatasetError(
      'bad-source',
      `${JSON.stringify(source.repo)} is not a Hub dataset id (org/name); a local file or folder goes in source.path`,
      { field: 'source.repo' },
    );
  }
  for (const [split, patterns] of Object.entries(source.files ?? {})) {
    if (
      typeof patterns !== 'string' &&
      !(Array.isArray(patterns) && patterns.length > 0 && patterns.every((p) => typeof p === 'string'))
    ) {
      throw new DatasetError(
        'bad-source',
        `must be a file pattern or a list of them (e.g. "data/${split}-*.parquet")`,
        { field: `source.files.${split}` },
      );
    }
  }
  if (source.format !== undefined && !FORMATS.includes(source.format)) {
    throw new DatasetError(
      'bad-source',
      `unknown format ${JSON.stringify(source.format)}; one of ${FORMATS.join(', ')}`,
      { field: 'source.format' },
    );
  }
  if (source.path !== undefined && source.revision !== undefined) {
    throw new DatasetError(
      'bad-source',
      'applies to a Hub dataset (source.repo); a local source.path has no revisions',
      { field: 'source.revision' },
    );
  }
}

async function loadHub(
  source: DatasetSourceSpec,
  repo: string,
  splits: string[],
  options: LoadOptions,
  assets: string[],
): Promise<TaskData> {
  const fetched = await fetchDataset(
    repo,
    {
      revision: source.revision ?? null,
      config: source.config,
      splits,
      files: source.files,
      format: source.format,
      ...(assets.length > 0 ? { assets } : {}),
    },
    options,
  );
  const read = new Map<string, ReadFile>();
  const records: Record<string, DatasetRecord[]> = {};
  const recordFiles: Record<string, { path: string; records: number }[]> = {};
  const files: DatasetFile[] = [];
  for (const split of splits) {
    const list = fetched.splits[split] ?? [];
    records[split] = [];
    recordFiles[split] = [];
    for (const f of list) {
      const shown = `${f.path} of ${repo}@${fetched.sha} (${f.local})`;
      const got = read.get(f.path) ?? (await readDataFile(f.local, shown, source.format, `source.files.${split}`));
      read.set(f.path, got);
      const blob = blobSha256(f.local);
      if (blob !== null && blob !== got.sha256) {
        throw new DatasetError(
          'bad-file',
          `${shown}: the cached copy's sha256 ${got.sha256} is not the ${blob} the Hub listed: the cache is damaged; delete that file and its blob, then ${fetchHint(repo, fetched.revision, split)}`,
          {
            file: f.local,
            split,
          },
        );
      }
      records[split].push(...got.records);
      recordFiles[split].push({ path: f.path, records: got.records.length });
      files.push({ split, path: f.path, sha256: got.sha256, bytes: got.bytes });
    }
    if (records[split].length === 0)
      throw emptySplit(
        split,
        `dataset ${repo}@${fetched.revision}`,
        list.map((f) => f.path),
      );
  }
  return {
    splits: records,
    features: featuresOf(fetched.card, fetched.config, [...read.values()]),
    provenance: {
      source: 'hub',
      repo,
      revision: fetched.revision,
      sha: fetched.sha,
      config: configOf(fetched.config),
      files,
    },
    root: fetched.snapshotDir,
    recordFiles,
  };
}

function fetchHint(repo: string, revision: string, split: string): string {
  return `fetch again: canary-audit datasets fetch ${repo}${revision !== 'main' ? ` --revision ${revision}` : ''} --split ${split}`;
}

async function loadLocal(
  source: DatasetSourceSpec,
  path: string,
  splits: string[],
  gridDir: string,
): Promise<TaskData> {
  const abs = resolve(gridDir, path);
  if (!existsSync(abs)) {
    throw new DatasetError(
      'bad-source',
      `no file or folder ${abs} (source.path is relative to the grid file's folder, ${resolve(gridDir)})`,
      { field: 'source.path', file: abs },
    );
  }
  const isDir = statSync(abs).isDirectory();
  if (!isDir && source.files !== undefined) {
    throw new DatasetError(
      'bad-source',
      `applies to a folder, and source.path names the file ${abs}; name the folder in source.path, or leave files out`,
      { field: 'source.files' },
    );
  }
  const root = isDir ? abs : dirname(abs);
  const listing = isDir ? walk(abs) : [basename(abs)];
  const what = `local dataset ${abs}`;
  let card: DatasetCard = EMPTY_CARD;
  if (isDir && listing.includes('README.md'))
    card = parseCard(readCardText(join(abs, 'README.md')), join(abs, 'README.md'));
  const config = chooseConfig(card, source.config, what);
  const resolved = resolveSplits(listing, { splits, files: source.files, config, format: source.format }, what);
  const read = new Map<string, ReadFile>();
  const records: Record<string, DatasetRecord[]> = {};
  const recordFiles: Record<string, { path: string; records: number }[]> = {};
  const files: DatasetFile[] = [];
  for (const split of splits) {
    const list = (resolved.bySplit[split] ?? []).map((p) => join(root, p));
    records[split] = [];
    recordFiles[split] = [];
    for (const file of list) {
      const got =
        read.get(file) ??
        (await readDataFile(file, file, source.format, source.files ? `source.files.${split}` : 'source.path'));
      read.set(file, got);
      records[split].push(...got.records);
      recordFiles[split].push({ path: file, records: got.records.length });
      files.push({ split, path: file, sha256: got.sha256, bytes: got.bytes });
    }
    if (records[split].length === 0) throw emptySplit(split, what, list);
  }
  return {
    splits: records,
    features: featuresOf(card, config?.name ?? null, [...read.values()]),
    provenance: { source: 'local', path: abs, ...(config ? { config: configOf(config.name) } : {}), files },
    root,
    recordFiles,
  };
}

/** The files of a folder, as '/'-separated paths inside it, hidden files and folders left out. */
function walk(root: string): string[] {
  const out: string[] = [];
  const visit = (dir: string, prefix: string): void => {
    for (const name of readdirSync(dir).sort()) {
      if (name.startsWith('.') || name === 'node_modules' || name === '__pycache__') continue;
      const full = join(dir, name);
      const rel = prefix ? `${prefix}/${name}` : name;
      const stat = statSync(full);
      if (stat.isDirectory()) visit(full, rel);
      else if (stat.isFile()) out.push(rel);
    }
  };
  visit(root, '');
  return out.sort();
}

function emptySplit(split: string, what: string, files: string[]): DatasetError {
  return new DatasetError(
    'empty-split',
    `split ${JSON.stringify(split)} of ${what} is empty: ${files.join(', ')} hold${files.length === 1 ? 's' : ''} no rows; check the file${files.length === 1 ? '' : 's'}, or name other files in source.files.${split}`,
    { field: `source.files.${split}`, split, file: files[0] },
  );
}

/** The card's class labels for the config, else those a Parquet file written by `datasets` carries. */
function featuresOf(card: DatasetCard, config: string | null, read: ReadFile[]): Record<string, DatasetFeature> {
  const fromCard = cardFeatures(card, config);
  if (fromCard && Object.keys(fromCard).length > 0) return fromCard;
  return read.find((r) => r.features && Object.keys(r.features).length > 0)?.features ?? {};
}

/** The manifest records null for the default config. */
function configOf(name: string | null): string | null {
  return name === null || name === 'default' ? null : name;
}

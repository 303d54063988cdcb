import type { DatasetFormat } from '../contracts/index.js';
import type { CardConfig } from './card.js';
import { DatasetError } from './errors.js';
import { isDataFile } from './formats.js';
import { matchGlob } from './glob.js';

/**
 * Which files make each split, decided as `datasets` decides it for a Hub repository or a folder:
 * the source's own `files` first; else the card's config (`configs[].data_files`); else the
 * names (the Hub's conventions, in this order, the first that finds any split winning):
 *   data/<split>-00000-of-00001*.*   sharded files of any split name
 *   a folder named by a split keyword (train/, data/dev/, my-test/)
 *   a file named with one (train.jsonl, tatqa_dataset_dev.json, x-test-0.csv)
 *   every data file otherwise, as the train split.
 * The keywords: train|training; validation|valid|dev|val; test|testing|eval|evaluation. A split
 * asked for by one of them (dev) finds the files of any of its group (validation).
 */
export const SPLIT_KEYWORDS: Record<string, string[]> = {
  train: ['train', 'training'],
  validation: ['validation', 'valid', 'dev', 'val'],
  test: ['test', 'testing', 'eval', 'evaluation'],
};

export interface SplitRequest {
  /** Splits asked for; null: every split found. */
  splits: string[] | null;
  /** The source's `files` (split → pattern or patterns). */
  files?: Record<string, string | string[]>;
  /** The card's chosen config, if the card declares any. */
  config: CardConfig | null;
  format?: DatasetFormat;
}

export interface SplitFiles {
  /** Files (listing paths, name order) per split asked for (every split found when none asked), keyed as asked. */
  bySplit: Record<string, string[]>;
  /** The splits the source has, by the rule used. */
  available: string[];
  basis: 'files' | 'card' | 'names';
}

/** `listing`: every file of the source (repository paths or paths inside the folder). `what`: the source, for messages. */
export function resolveSplits(listing: readonly string[], request: SplitRequest, what: string): SplitFiles {
  const visible = listing
    .filter((p) => !p.split('/').some((part) => part.startsWith('.')) && !/^readme\.md$/i.test(p))
    .sort();
  let found: Record<string, string[]>;
  let basis: SplitFiles['basis'];
  let patterns: Record<string, string[]> | null = null;
  if (request.files) {
    basis = 'files';
    patterns = Object.fromEntries(Object.entries(request.files).map(([s, p]) => [s, typeof p === 'string' ? [p] : p]));
  } else if (request.config?.dataFiles) {
    basis = 'card';
    patterns = request.config.dataFiles;
  } else {
    basis = 'names';
  }
  if (patterns) {
    found = {};
    for (const [split, list] of Object.entries(patterns))
      found[split] = [...new Set(list.flatMap((p) => matchGlob(p, visible)))].sort();
  } else {
    found = byNames(visible.filter((p) => isDataFile(p, request.format)));
  }
  const available = Object.keys(found).filter((s) => (found[s] as string[]).length > 0);
  const bySplit: Record<string, string[]> = {};
  for (const asked of request.splits ?? available) {
    const key = splitKey(asked, Object.keys(found));
    const files = key === null ? [] : (found[key] as string[]);
    if (files.length === 0) throw missingSplit(asked, key, what, available, basis, patterns, request.config);
    bySplit[asked] = files;
  }
  return { bySplit, available, basis };
}

/** The split of `names` an asked split means: itself, else one of its keyword group. */
function splitKey(asked: string, names: string[]): string | null {
  if (names.includes(asked)) return asked;
  const group = Object.entries(SPLIT_KEYWORDS).find(
    ([canonical, words]) => canonical === asked || words.includes(asked.toLowerCase()),
  );
  if (!group) return null;
  return [group[0], ...group[1]].find((n) => names.includes(n)) ?? null;
}

function missingSplit(
  asked: string,
  key: string | null,
  what: string,
  available: string[],
  basis: SplitFiles['basis'],
  patterns: Record<string, string[]> | null,
  config: CardConfig | null,
): DatasetError {
  const has =
    available.length > 0
      ? `its splits: ${available.join(', ')}`
      : basis === 'names'
        ? 'it has no data files at all'
        : 'no split has any file';
  const listed = key !== null && patterns?.[key] ? patterns[key] : null;
  if (basis === 'files') {
    const why = listed
      ? `source.files.${key} (${listed.map((p) => JSON.stringify(p)).join(', ')}) matches no file`
      : `source.files names no split ${JSON.stringify(asked)}`;
    return new DatasetError('missing-split', `${what} has no split ${JSON.stringify(asked)}: ${why}; ${has}`, {
      field: listed ? `source.files.${key}` : 'source.files',
      split: asked,
    });
  }
  if (basis === 'card') {
    const name = config ? `config ${JSON.stringify(config.name)}` : 'card';
    const why = listed
      ? `the card's ${name} gives it the files ${listed.map((p) => JSON.stringify(p)).join(', ')}, which match no file`
      : `the card's ${name} declares no such split`;
    return new DatasetError(
      'missing-split',
      `${what} has no split ${JSON.stringify(asked)}: ${why}; ${has}; name its files in source.files.${asked}`,
      { field: `source.files.${asked}`, split: asked },
    );
  }
  return new DatasetError(
    'missing-split',
    `${what} has no split ${JSON.stringify(asked)} (no file or folder is named for it); ${has}; name its files in source.files.${asked}`,
    { field: `source.files.${asked}`, split: asked },
  );
}

const SEP = '[-._ 0-9]';
const SHARDED = /^data\/(\w+(?:[.-]\w+)*?)-\d{5}-of-\d{5}[^/]*$/;

/** Splits by the Hub's naming conventions (see the top of this file). */
export function byNames(files: readonly string[]): Record<string, string[]> {
  const sharded: Record<string, string[]> = {};
  for (const f of files) {
    const m = SHARDED.exec(f);
    if (m) (sharded[m[1] as string] ??= []).push(f);
  }
  if (Object.keys(sharded).length > 0) return sharded;
  const byDir = byKeyword(files, (kw) => new RegExp(`(?:^|/)(?:[^/]*${SEP})?${kw}/`, 'i'));
  if (Object.keys(byDir).length > 0) return byDir;
  const byFile = byKeyword(files, (kw) => new RegExp(`(?:^|/|${SEP})${kw}${SEP}[^/]*$`, 'i'));
  if (Object.keys(byFile).length > 0) return byFile;
  return files.length > 0 ? { train: [...files] } : {};
}

function byKeyword(files: readonly string[], pattern: (keyword: string) => RegExp): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [split, words] of Object.entries(SPLIT_KEYWORDS)) {
    const res = words.map(pattern);
    const matched = files.filter((f) => res.some((re) => re.test(f)));
    if (matched.length > 0) out[split] = matched;
  }
  return out;
}

import { parse as parseYaml, YAMLParseError } from 'yaml';
import type { DatasetFeature } from '../contracts/index.js';
import { badFile, DatasetError } from './errors.js';

/**
 * The dataset card (README.md): its YAML front matter says which files make each split of each
 * config (`configs`), and what the columns are (`dataset_info.features`, class label names
 * included), the way the Hub and `datasets` read it.
 */
export interface CardConfig {
  name: string;
  /** Marked `default: true`. */
  isDefault: boolean;
  /** Split → file patterns; null when the config names no data_files. */
  dataFiles: Record<string, string[]> | null;
}

export interface DatasetCard {
  configs: CardConfig[];
  /** Features per config (`dataset_info`, one entry or one per config); key null: no config_name. */
  features: Map<string | null, Record<string, DatasetFeature>>;
}

export const EMPTY_CARD: DatasetCard = { configs: [], features: new Map() };

/** The card's YAML front matter (between the first two `---` lines); a card without one is empty. */
export function parseCard(text: string, file: string): DatasetCard {
  const m = /^\uFEFF?---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(text);
  if (!m) return EMPTY_CARD;
  let meta: unknown;
  try {
    meta = parseYaml(m[1] as string);
  } catch (error) {
    // +1: the card's line numbers count the opening `---`.
    const line = error instanceof YAMLParseError && error.linePos ? `line ${error.linePos[0].line + 1}: ` : '';
    const reason = ((error as Error).message.split('\n')[0] as string).replace(/ at line \d+, column \d+:?$/, '');
    throw badFile(
      file,
      `${line}the card's YAML front matter does not parse (${reason}); fix the card or name the files of each split in source.files`,
      { cause: error },
    );
  }
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) return EMPTY_CARD;
  const doc = meta as Record<string, unknown>;
  return { configs: configsOf(doc.configs, file), features: featuresOf(doc.dataset_info, file) };
}

function configsOf(value: unknown, file: string): CardConfig[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value))
    throw badFile(
      file,
      '`configs` in the card is not a list; fix the card or name the files of each split in source.files',
    );
  return value.map((entry, i) => {
    const c = (entry ?? {}) as Record<string, unknown>;
    const name = typeof c.config_name === 'string' ? c.config_name : 'default';
    return {
      name,
      isDefault: c.default === true,
      dataFiles: dataFilesOf(c.data_files, `configs[${i}].data_files`, file),
    };
  });
}

/** data_files as cards write it: a pattern, a list of patterns (both: train), a list of {split, path}, or {split: pattern(s)}. */
function dataFilesOf(value: unknown, where: string, file: string): Record<string, string[]> | null {
  if (value === undefined || value === null) return null;
  const patterns = (v: unknown, at: string): string[] => {
    if (typeof v === 'string') return [v];
    if (Array.isArray(v) && v.every((p) => typeof p === 'string')) return v as string[];
    throw badFile(file, `${at} in the card is neither a file pattern nor a list of them`);
  };
  if (typeof value === 'string' || (Array.isArray(value) && value.every((v) => typeof v === 'string')))
    return { train: patterns(value, where) };
  const out: Record<string, string[]> = {};
  if (Array.isArray(value)) {
    value.forEach((entry, i) => {
      const e = (entry ?? {}) as Record<string, unknown>;
      const split = typeof e.split === 'string' ? e.split : 'train';
      out[split] = [...(out[split] ?? []), ...patterns(e.path, `${where}[${i}].path`)];
    });
    return out;
  }
  if (typeof value === 'object') {
    for (const [split, v] of Object.entries(value as Record<string, unknown>))
      out[split] = patterns(v, `${where}.${split}`);
    return out;
  }
  throw badFile(file, `${where} in the card is not a pattern, a list or a mapping of splits`);
}

function featuresOf(value: unknown, file: string): Map<string | null, Record<string, DatasetFeature>> {
  const map = new Map<string | null, Record<string, DatasetFeature>>();
  const infos = Array.isArray(value) ? value : value && typeof value === 'object' ? [value] : [];
  infos.forEach((info, i) => {
    const at = Array.isArray(value) ? `dataset_info[${i}]` : 'dataset_info';
    const entry = (info ?? {}) as Record<string, unknown>;
    const config = typeof entry.config_name === 'string' ? entry.config_name : null;
    map.set(config, classLabels(entry.features, `${at}.features`, file));
  });
  return map;
}

/** Class-label columns of a features list ([{name, dtype: {class_label: {names}}}]) or mapping ({column: spec}). */
function classLabels(value: unknown, at: string, file: string): Record<string, DatasetFeature> {
  const out: Record<string, DatasetFeature> = {};
  const entries: [string, unknown, string][] = Array.isArray(value)
    ? value.map((f, i) => [String((f as { name?: unknown })?.name ?? ''), f, `${at}[${i}]`])
    : value && typeof value === 'object'
      ? Object.entries(value).map(([k, f]) => [k, f, `${at}.${k}`])
      : [];
  for (const [name, spec, where] of entries) {
    const s = (spec ?? {}) as Record<string, unknown>;
    const dtype = s.dtype && typeof s.dtype === 'object' ? (s.dtype as Record<string, unknown>) : {};
    const label = (dtype.class_label ?? s.class_label) as { names?: unknown } | undefined;
    if (!name || !label || typeof label !== 'object') continue;
    out[name] = { names: labelNames(label.names, `${where}.class_label.names`, file) };
  }
  return out;
}

/** names as a list, or as a mapping '0': name, '1': name, ... (keys 0..n-1). */
function labelNames(value: unknown, at: string, file: string): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (!value || typeof value !== 'object')
    throw badFile(file, `${at} in the card is neither a list nor a mapping of index to name`);
  const entries = Object.entries(value as Record<string, unknown>);
  const names: string[] = new Array<string>(entries.length);
  for (const [key, name] of entries) {
    const index = Number(key);
    if (!Number.isInteger(index) || index < 0 || index >= entries.length || names[index] !== undefined) {
      throw badFile(
        file,
        `${at} in the card has key ${JSON.stringify(key)}; the keys must be the indices 0 to ${entries.length - 1}`,
      );
    }
    names[index] = String(name);
  }
  return names;
}

/**
 * The config a source asks for (`source.config`), else the one marked default, else the one named
 * default, else the first. Null when the card declares none (and none is asked for).
 */
export function chooseConfig(card: DatasetCard, asked: string | undefined, what: string): CardConfig | null {
  if (asked !== undefined) {
    const found = card.configs.find((c) => c.name === asked);
    if (found) return found;
    const have =
      card.configs.length === 0
        ? 'its card declares no configs (leave source.config out)'
        : `its configs: ${card.configs.map((c) => c.name).join(', ')}`;
    throw new DatasetError('bad-source', `${what} has no config ${JSON.stringify(asked)}; ${have}`, {
      field: 'source.config',
    });
  }
  return (
    card.configs.find((c) => c.isDefault) ?? card.configs.find((c) => c.name === 'default') ?? card.configs[0] ?? null
  );
}

/** Class labels the card declares for a config (or for the card's only dataset_info). */
export function cardFeatures(card: DatasetCard, config: string | null): Record<string, DatasetFeature> | null {
  const f = card.features;
  if (config !== null && f.has(config)) return f.get(config) ?? null;
  if (f.has(null)) return f.get(null) ?? null;
  if (config === null && f.has('default')) return f.get('default') ?? null;
  return f.size === 1 && config === null ? ([...f.values()][0] ?? null) : null;
}

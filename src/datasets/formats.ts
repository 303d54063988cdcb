import { createHash } from 'node:crypto';
import * as zlib from 'node:zlib';
import { parquetMetadataAsync, parquetReadObjects, type Compressors } from 'hyparquet';
import { jsonErrorOffset } from '../fs/index.js';
import type { DatasetFeature, DatasetFormat, DatasetRecord } from '../contracts/index.js';
import { readInside, readInsideSync, ReadBoundaryError } from '../fs/read-boundary.js';
import { csvRecords } from './csv.js';
import { badFile, DatasetError } from './errors.js';

/** The formats read, by file extension. */
const EXTENSIONS: Record<string, DatasetFormat> = {
  '.jsonl': 'jsonl',
  '.ndjson': 'jsonl',
  '.json': 'json',
  '.csv': 'csv',
  '.parquet': 'parquet',
};
export const FORMATS: readonly DatasetFormat[] = ['jsonl', 'json', 'csv', 'parquet'];

/** The format a file's name implies, or null. */
export function formatOfName(path: string): DatasetFormat | null {
  const m = /(\.[A-Za-z0-9]+)$/.exec(path);
  return m ? (EXTENSIONS[(m[1] as string).toLowerCase()] ?? null) : null;
}

/** Never data, even when the source names a format for files whose names say none. */
const NOT_DATA = /(?:^|\/)(?:LICEN[CS]E[^/]*|[^/]*\.(?:md|py|ya?ml|lock|gitattributes))$/i;

/** A file the loader can read: by its extension, or, when the source names a format, any file but docs and code. */
export function isDataFile(path: string, format: DatasetFormat | undefined): boolean {
  if (formatOfName(path) !== null) return true;
  return format !== undefined && !NOT_DATA.test(path);
}

export interface ReadFile {
  records: DatasetRecord[];
  sha256: string;
  bytes: number;
  /** Class labels a Parquet file written by `datasets` declares in its metadata. */
  features: Record<string, DatasetFeature> | null;
}

/**
 * Read one data file. `shown` is the name errors use (the repository path for a Hub file, the
 * path on disk for a local one); `field` is where in the source the fix would go.
 */
export async function readDataFile(
  file: string,
  shown: string,
  format: DatasetFormat | undefined,
  field?: string,
): Promise<ReadFile> {
  const fmt = format ?? formatOfName(file);
  if (fmt === null) {
    throw new DatasetError(
      'bad-source',
      `${shown}: no data format for this file name; name the format (source.format: ${FORMATS.join(' | ')}) or use a .jsonl, .json, .csv or .parquet file`,
      { field: 'source.format', file: shown },
    );
  }
  if (fmt === 'parquet') return readParquet(file, shown, field);
  let buffer: Buffer;
  try {
    buffer = await readDataBytes(file);
  } catch (error) {
    throw unreadable(shown, field, error);
  }
  const sha256 = createHash('sha256').update(buffer).digest('hex');
  const text = decodeUtf8(buffer, shown, field);
  const records =
    fmt === 'jsonl'
      ? jsonLines(text, shown, field)
      : fmt === 'csv'
        ? csvRecords(text, shown)
        : jsonRecords(text, shown, field);
  return { records, sha256, bytes: buffer.length, features: null };
}

function decodeUtf8(buffer: Buffer, shown: string, field: string | undefined): string {
  try {
    const text = new TextDecoder('utf-8', { fatal: true }).decode(buffer);
    return text.startsWith('\uFEFF') ? text.slice(1) : text;
  } catch (error) {
    throw badFile(
      shown,
      'is not UTF-8 text; convert it to UTF-8 (or check the file is not a binary format under a text extension)',
      { field, cause: error },
    );
  }
}

/** One JSON object per line; blank lines are skipped. */
function jsonLines(text: string, shown: string, field: string | undefined): DatasetRecord[] {
  const records: DatasetRecord[] = [];
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      const column = jsonErrorOffset(line) + 1 + (raw.length - raw.trimStart().length);
      throw badFile(
        shown,
        `line ${i + 1}, column ${column}: not valid JSON (${firstLine(error)}); each line of a .jsonl file is one JSON object`,
        { field, cause: error },
      );
    }
    if (!isRecord(value))
      throw badFile(
        shown,
        `line ${i + 1}: a JSON ${kindOf(value)}, not an object; each line of a .jsonl file is one record {"column": value, ...}`,
        { field },
      );
    records.push(value);
  });
  return records;
}

/**
 * A JSON document: an array of records, or an object holding them in one array field (`data`, or
 * its only array field). A .json file that is JSON Lines is read as such, as `datasets` does.
 */
function jsonRecords(text: string, shown: string, field: string | undefined): DatasetRecord[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    const lines = text.split('\n').filter((l) => l.trim() !== '');
    if (lines.length > 1 && lines.every((l) => /^\s*\{/.test(l))) {
      try {
        return jsonLines(text, shown, field);
      } catch {
        // not JSON Lines either: report the document's error
      }
    }
    const offset = jsonErrorOffset(text);
    const before = text.slice(0, offset);
    const where = `line ${before.split('\n').length}, column ${offset - before.lastIndexOf('\n')}`;
    throw badFile(
      shown,
      `${where}: not valid JSON (${firstLine(error)}); the file is damaged or truncated — fetch or export it again`,
      { field, cause: error },
    );
  }
  let rows: unknown = doc;
  if (isRecord(doc)) {
    const arrays = Object.entries(doc).filter(([, v]) => Array.isArray(v));
    const chosen = Array.isArray(doc.data)
      ? (['data', doc.data] as const)
      : arrays.length === 1
        ? arrays[0]
        : undefined;
    if (!chosen) {
      const names = arrays.map(([k]) => k);
      throw badFile(
        shown,
        `a JSON object with ${names.length === 0 ? 'no array field' : `several array fields (${names.join(', ')})`}; the records must be a top-level array, or an object's \`data\` array`,
        { field },
      );
    }
    rows = chosen[1];
  }
  if (!Array.isArray(rows))
    throw badFile(shown, `a JSON ${kindOf(rows)}; the records must be a top-level array of objects`, { field });
  rows.forEach((row, i) => {
    if (!isRecord(row))
      throw badFile(
        shown,
        `record ${i} is a JSON ${kindOf(row)}, not an object; the records must be objects {"column": value, ...}`,
        { field },
      );
  });
  return rows as DatasetRecord[];
}

/**
 * Parquet through hyparquet: snappy and uncompressed pages natively, gzip and brotli (and zstd
 * where this Node has it) through node:zlib. 64-bit integers come back as BigInt: within 2^53
 * they become numbers, beyond it decimal strings (never a silently rounded number).
 */
async function readParquet(file: string, shown: string, field: string | undefined): Promise<ReadFile> {
  let data: Buffer;
  try {
    data = await readDataBytes(file);
  } catch (error) {
    throw unreadable(shown, field, error);
  }
  // Read once, through the boundary; the Parquet reader works on these bytes (an ArrayBuffer is
  // its AsyncBuffer), so the file hashed is the file parsed.
  const sha256 = createHash('sha256').update(data).digest('hex');
  const bytes = data.length;
  let rows: Record<string, unknown>[];
  let features: Record<string, DatasetFeature> | null = null;
  try {
    const buffer = (data.buffer as ArrayBuffer).slice(data.byteOffset, data.byteOffset + data.byteLength);
    const metadata = await parquetMetadataAsync(buffer);
    features = hfParquetFeatures(metadata.key_value_metadata?.find((kv) => kv.key === 'huggingface')?.value);
    // utf8: false: a BYTE_ARRAY without a string annotation is binary (an image column's
    // `bytes`, as `datasets` writes it); string columns are annotated and still come back as text.
    rows = await parquetReadObjects({ file: buffer, metadata, compressors: COMPRESSORS, utf8: false });
  } catch (error) {
    const reason = firstLine(error);
    const codec = /unsupported compression codec: (\w+)/.exec(reason)?.[1];
    const fix = codec
      ? `its pages are ${codec}-compressed, which this reader lacks; rewrite it with snappy, gzip or no compression (pyarrow: pq.write_table(t, path, compression="snappy"))`
      : 'it is not a readable Parquet file (damaged or truncated); fetch or export it again';
    throw badFile(shown, `${reason}; ${fix}`, { field, cause: error });
  }
  return { records: rows.map((row) => plain(row) as DatasetRecord), sha256, bytes, features };
}

const COMPRESSORS: Compressors = {
  GZIP: (input) => new Uint8Array(zlib.gunzipSync(input)),
  BROTLI: (input) => new Uint8Array(zlib.brotliDecompressSync(input)),
  ...zstd(),
};

function zstd(): Compressors {
  const decompress = (zlib as unknown as { zstdDecompressSync?: (b: Uint8Array) => Buffer }).zstdDecompressSync;
  return decompress ? { ZSTD: (input) => new Uint8Array(decompress(input)) } : {};
}

/** BigInts to numbers (or strings past 2^53), at any depth. */
function plain(value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  if (Array.isArray(value)) return value.map(plain);
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}

/** `datasets` stores its features in a Parquet file's `huggingface` metadata: {"info": {"features": {...}}}. */
function hfParquetFeatures(json: string | undefined): Record<string, DatasetFeature> | null {
  if (!json) return null;
  try {
    const features = (JSON.parse(json) as { info?: { features?: Record<string, { _type?: string; names?: unknown }> } })
      .info?.features;
    if (!features || typeof features !== 'object') return null;
    const out: Record<string, DatasetFeature> = {};
    for (const [name, f] of Object.entries(features)) {
      if (f?._type === 'ClassLabel' && Array.isArray(f.names) && f.names.every((n) => typeof n === 'string'))
        out[name] = { names: f.names as string[] };
    }
    return out;
  } catch {
    return null;
  }
}

/** Largest dataset file read, bytes (a Buffer's practical limit). */
export const MAX_DATA_FILE_BYTES = 2 ** 31 - 1;

/**
 * A dataset file's bytes through the read boundary: a regular file (a FIFO or a device is refused,
 * not waited on or read without end), at most MAX_DATA_FILE_BYTES, opened once. Its root is the
 * file system's: a Hub snapshot's files are links into the cache's blobs/, and a local dataset
 * may link its files from elsewhere on purpose.
 */
function readDataBytes(file: string): Promise<Buffer> {
  return readInside('/', file, { maxBytes: MAX_DATA_FILE_BYTES, what: 'dataset file' });
}

/** Largest dataset card (README.md) read, bytes. */
const MAX_CARD_BYTES = 16 * 1024 * 1024;

/** A dataset's README.md through the read boundary (a regular file, at most 16 MiB), as text. */
export function readCardText(file: string): string {
  return readInsideSync('/', file, { maxBytes: MAX_CARD_BYTES, what: 'dataset card' }).toString('utf8');
}

/** A dataset file that cannot be read, in one line: the boundary's reason, or the system's code. */
function unreadable(shown: string, field: string | undefined, error: unknown): Error {
  if (error instanceof ReadBoundaryError && !/: no such /.test(error.message)) {
    return badFile(shown, `${error.message.slice(error.message.indexOf(': ') + 2)}`, { field, cause: error });
  }
  const code =
    error instanceof ReadBoundaryError
      ? ((error.cause as NodeJS.ErrnoException | undefined)?.code ?? 'ENOENT')
      : ((error as NodeJS.ErrnoException).code ?? (error as Error).message);
  return badFile(shown, `cannot be read (${code}); check the file exists and is readable`, { field, cause: error });
}

function isRecord(value: unknown): value is DatasetRecord {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function kindOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value === 'object' ? 'object' : typeof value;
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] as string;
}

import { createHash } from 'node:crypto';
import { closeSync, openSync, writevSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { canonicalJson } from '../hash.js';
import { replicateKey, type LoadedGrid } from '../grid/index.js';
import type { CanaryPool, PoolCanary } from './canaries.js';
import type { CanaryExample } from './tasks/index.js';
import type { RunRenderer } from './manifest.js';
import type { RunLayout } from './plan-run.js';
import { Rng } from '../random.js';

/** A run's training row for one inserted canary: its identity and message, the cue the run shows. */
export function canaryTrainingRow(pool: CanaryPool, renderer: RunRenderer, canary: PoolCanary): CanaryExample {
  const { task, rowSpec, cue } = renderer;
  return task.canary(
    pool.identity(task, canary.id).value,
    pool.message(task, rowSpec, canary.id),
    cue.encode(canary.code),
    canary.code,
    cue.visibility,
  );
}

/** A canary row as rows.jsonl prints it, less its leading `{"i":N,` (the only part that changes per appearance). */
function canaryRowRest(pool: CanaryPool, renderer: RunRenderer, canary: PoolCanary): string {
  const example = canaryTrainingRow(pool, renderer, canary);
  return JSON.stringify({
    kind: 'canary',
    canary_id: canary.id,
    prompt: example.prompt,
    target: example.target,
    ...boxOf(example),
  }).slice(1);
}

/**
 * The rows of a run, produced lazily as JSON lines in training order. Row i of the background
 * sequence is drawn for every i, even where a canary replaces it, so the background is one fixed
 * sequence per (grid seed, task) — per seed value too with joint seeds — and cells differ only at
 * canary rows. A canary row is identical
 * at each of its appearances.
 */
export function* trainingRowLines(
  grid: LoadedGrid,
  pool: CanaryPool,
  layout: RunLayout,
  renderer: RunRenderer,
): Generator<string> {
  const { task, rowSpec } = renderer;
  const excluded = pool.identityKeys(task);
  const next = task.rows(backgroundStream(grid, rowSpec, layout.cell.values.seed.value), excluded, 'train');
  const slot = new Int32Array(grid.rows).fill(-1);
  const rests: string[] = layout.canaries.map((c, k) => {
    for (const r of c.positions) slot[r] = k;
    return canaryRowRest(pool, renderer, c.canary);
  });
  for (let i = 0; i < grid.rows; i += 1) {
    const row = next();
    const k = slot[i] as number;
    if (k >= 0) yield `{"i":${i},${rests[k] as string}`;
    else
      yield JSON.stringify({
        i,
        kind: 'background',
        canary_id: null,
        prompt: row.prompt,
        target: row.target,
        ...boxOf(row),
      });
  }
}

/**
 * The background sequence of one (grid seed, task) as bytes: line i (with its newline) is
 * `bytes[offsets[i] .. offsets[i + 1])`, exactly as `trainingRowLines` would print row i when no
 * canary replaces it. Built once per audit write and shared by every run with that task, so runs
 * only splice their canary rows in.
 */
export interface BackgroundRows {
  bytes: Buffer;
  offsets: Float64Array;
}

/**
 * The stream of a task's background rows: one per (grid seed, task), and with joint seeds
 * (`replicates: {vary: joint}`) one per seed value as well, so each seed trains on its own order.
 */
export function backgroundStream(grid: LoadedGrid, rowSpec: RunRenderer['rowSpec'], seed: number): Rng {
  return new Rng(grid.doc.seed, 'background', canonicalJson(rowSpec), ...replicateKey(grid, seed));
}

/** The key runs share a background sequence by: the task, and the seed when seeds are joint. */
export function backgroundKey(grid: LoadedGrid, rowSpec: RunRenderer['rowSpec'], seed: number): string {
  return canonicalJson([rowSpec, ...replicateKey(grid, seed)]);
}

export function backgroundRows(
  grid: LoadedGrid,
  pool: CanaryPool,
  renderer: RunRenderer,
  seed: number,
): BackgroundRows {
  const { task, rowSpec } = renderer;
  const excluded = pool.identityKeys(task);
  const next = task.rows(backgroundStream(grid, rowSpec, seed), excluded, 'train');
  const offsets = new Float64Array(grid.rows + 1);
  const chunks: Buffer[] = [];
  let lines: string[] = [];
  let size = 0;
  let at = 0;
  const flush = (): void => {
    const buffer = Buffer.from(lines.join(''), 'utf8');
    chunks.push(buffer);
    lines = [];
    size = 0;
  };
  for (let i = 0; i < grid.rows; i += 1) {
    const row = next();
    const line = `${JSON.stringify({ i, kind: 'background', canary_id: null, prompt: row.prompt, target: row.target, ...boxOf(row) })}\n`;
    offsets[i] = at;
    at += Buffer.byteLength(line, 'utf8');
    lines.push(line);
    size += line.length;
    if (size >= 1 << 20) flush();
  }
  flush();
  offsets[grid.rows] = at;
  return { bytes: Buffer.concat(chunks, at), offsets };
}

/**
 * Write a run's rows.jsonl from the shared background bytes with its canary rows spliced in: the
 * same bytes as `writeLines(path, trainingRowLines(...))`, without generating the background again.
 * Not fsynced: the caller makes a whole write's files durable in one pass (`syncPaths`).
 */
export async function writeTrainingRows(
  path: string,
  background: BackgroundRows,
  grid: LoadedGrid,
  pool: CanaryPool,
  layout: RunLayout,
  renderer: RunRenderer,
): Promise<WrittenLines & { images: Set<string> }> {
  const scan = renderer.task.images !== undefined;
  const images = new Set<string>();
  const canaryAt = new Map<number, string>();
  layout.canaries.forEach((c) => {
    const rest = canaryRowRest(pool, renderer, c.canary);
    for (const r of c.positions) canaryAt.set(r, rest);
  });
  const positions = [...canaryAt.keys()].sort((a, b) => a - b);
  const hash = createHash('sha256');
  const fd = openSync(path, 'w');
  let bytes = 0;
  let pending: Buffer[] = [];
  let pendingSize = 0;
  const push = (buffer: Buffer): void => {
    // Every buffer holds whole lines, so no image part is split between two.
    if (scan) imageShas(buffer.toString('utf8'), images);
    hash.update(buffer);
    bytes += buffer.length;
    pending.push(buffer);
    pendingSize += buffer.length;
    if (pendingSize >= 1 << 20) flush();
  };
  const flush = (): void => {
    if (pending.length === 0) return;
    // libuv writes every buffer in full (it loops over partial writes); no copy into one buffer.
    // Synchronous: a write into the page cache costs less than a trip through the thread pool.
    writevSync(fd, pending);
    pending = [];
    pendingSize = 0;
  };
  const { offsets } = background;
  try {
    let from = 0;
    for (const r of positions) {
      if (r > from) push(background.bytes.subarray(offsets[from] as number, offsets[r] as number));
      push(Buffer.from(`{"i":${r},${canaryAt.get(r) as string}\n`, 'utf8'));
      from = r + 1;
    }
    if (from < grid.rows) push(background.bytes.subarray(offsets[from] as number, offsets[grid.rows] as number));
    flush();
  } finally {
    closeSync(fd);
  }
  return { sha256: hash.digest('hex'), count: grid.rows, bytes, images };
}

/** How many utility rows a run gets: the task's utility.rows or else the grid's count, at most all a dataset's utility split holds. */
export function utilityRowCount(grid: LoadedGrid, renderer: RunRenderer): number {
  return Math.min(
    renderer.task.utilityRowsWanted ?? grid.doc.utility.rows,
    renderer.task.utilityRows ?? Number.POSITIVE_INFINITY,
  );
}

/** Held-out rows for the utility metrics: a separate stream (or split), never trained on. */
export function* utilityRowLines(grid: LoadedGrid, pool: CanaryPool, renderer: RunRenderer): Generator<string> {
  const excluded = pool.identityKeys(renderer.task);
  const next = renderer.task.rows(
    new Rng(grid.doc.seed, 'utility', canonicalJson(renderer.taskSpec)),
    excluded,
    'utility',
  );
  const count = utilityRowCount(grid, renderer);
  for (let i = 0; i < count; i += 1) {
    const row = next();
    yield JSON.stringify({
      i,
      kind: 'background',
      canary_id: null,
      prompt: row.prompt,
      target: row.target,
      ...boxOf(row),
    });
  }
}

/** A grounding row's `box` field, or nothing (text rows have none). */
function boxOf(row: { box?: [number, number, number, number] }): { box?: [number, number, number, number] } {
  return row.box ? { box: row.box } : {};
}

const IMAGE_SHA = /"type":"image","path":"images\/[0-9a-f]{64}\.(?:png|jpg)","sha256":"([0-9a-f]{64})"/g;

/** The sha256 of every image part in JSON text written by this module (rows, probes), added to `into`. */
export function imageShas(text: string, into: Set<string>): Set<string> {
  for (const m of text.matchAll(IMAGE_SHA)) into.add(m[1] as string);
  return into;
}

export interface WrittenLines {
  sha256: string;
  count: number;
  bytes: number;
}

/** Stream lines to `path` (one per line), hashing as it writes; fsynced before returning. */
export async function writeLines(path: string, lines: Iterable<string>): Promise<WrittenLines> {
  const hash = createHash('sha256');
  const handle = await open(path, 'w');
  let count = 0;
  let bytes = 0;
  let chunk: string[] = [];
  let size = 0;
  const flush = async (): Promise<void> => {
    if (chunk.length === 0) return;
    const buffer = Buffer.from(chunk.join(''), 'utf8');
    hash.update(buffer);
    bytes += buffer.length;
    await handle.write(buffer);
    chunk = [];
    size = 0;
  };
  try {
    for (const line of lines) {
      chunk.push(line, '\n');
      size += line.length + 1;
      count += 1;
      if (size >= 1 << 20) await flush();
    }
    await flush();
    await handle.sync();
  } finally {
    await handle.close();
  }
  return { sha256: hash.digest('hex'), count, bytes };
}

/** Hash lines exactly as `writeLines` would store them, without touching the disk. */
export function hashLines(lines: Iterable<string>): WrittenLines {
  const hash = createHash('sha256');
  let count = 0;
  let bytes = 0;
  for (const line of lines) {
    const buffer = Buffer.from(`${line}\n`, 'utf8');
    hash.update(buffer);
    bytes += buffer.length;
    count += 1;
  }
  return { sha256: hash.digest('hex'), count, bytes };
}

import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { canonicalJson } from '../hash.js';
import type { LoadedGrid } from '../grid/index.js';
import type { CanaryPool } from './canaries.js';
import type { RunRenderer } from './manifest.js';
import type { RunLayout } from './plan-run.js';
import { Rng } from '../random.js';

/**
 * The rows of a run, produced lazily as JSON lines in training order. Row i of the background
 * sequence is drawn for every i, even where a canary replaces it, so the background is one fixed
 * sequence per (grid seed, task) and cells differ only at canary rows. A canary row is identical
 * at each of its appearances.
 */
export function* trainingRowLines(grid: LoadedGrid, pool: CanaryPool, layout: RunLayout, renderer: RunRenderer): Generator<string> {
  const { task, taskSpec, cue } = renderer;
  const excluded = pool.identityKeys(task);
  const background = new Rng(grid.doc.seed, 'background', canonicalJson(taskSpec));
  const slot = new Int32Array(grid.rows).fill(-1);
  const rests: string[] = layout.canaries.map((c, k) => {
    for (const r of c.positions) slot[r] = k;
    const identity = pool.identity(task, c.canary.id);
    const message = pool.message(task, taskSpec, c.canary.id);
    const example = task.canary(identity.value, message, cue.encode(c.canary.code), c.canary.code);
    // Everything after `{"i":N,` — the row's index is the only part that changes per appearance.
    return JSON.stringify({ kind: 'canary', canary_id: c.canary.id, prompt: example.prompt, target: example.target }).slice(1);
  });
  for (let i = 0; i < grid.rows; i += 1) {
    const row = task.background(background, excluded);
    const k = slot[i] as number;
    if (k >= 0) yield `{"i":${i},${rests[k] as string}`;
    else yield JSON.stringify({ i, kind: 'background', canary_id: null, prompt: row.prompt, target: row.target });
  }
}

/** Held-out background rows for the utility metric: a separate stream, never trained on. */
export function* utilityRowLines(grid: LoadedGrid, pool: CanaryPool, renderer: RunRenderer): Generator<string> {
  const excluded = pool.identityKeys(renderer.task);
  const rng = new Rng(grid.doc.seed, 'utility', canonicalJson(renderer.taskSpec));
  for (let i = 0; i < grid.doc.utility.rows; i += 1) {
    const row = renderer.task.background(rng, excluded);
    yield JSON.stringify({ i, kind: 'background', canary_id: null, prompt: row.prompt, target: row.target });
  }
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

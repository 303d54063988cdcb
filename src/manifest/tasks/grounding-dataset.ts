import { existsSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { Image } from '@napi-rs/canvas';
import type { DatasetRecord, DatasetSourceSpec, ImagePart, Message, TaskData } from '../../contracts/index.js';
import { canonicalJson, sha256Hex } from '../../hash.js';
import { Rng } from '../../random.js';
import { ReadBoundaryError, readInsideSync } from '../../fs/read-boundary.js';
import { checkImageHeader, MAX_IMAGE_FILE_BYTES } from '../images/header.js';
import { ImageStore, pngChunks } from '../images/index.js';
import { epochs } from './dataset/task.js';
import { TaskSpecError } from './dataset/records.js';
import { clickAction, GUI_SYSTEM, guiGroundingTask } from './gui-grounding/index.js';
import type { Task, TaskExample } from './task.js';

/**
 * GUI grounding rows from a dataset: each record an image (`{bytes, path}` as `datasets` writes an
 * Image feature to Parquet, the bytes themselves, or, with `image_root`, a file path inside the
 * dataset's folder, as ScreenSpot-Pro and OSWorld-G ship them), an instruction and a target box.
 * The reply is the click action at the box's centre, the row's `box` the box in image pixels, so
 * utility is point-in-box accuracy as for the synthetic task. Canaries are the synthetic typing
 * task's (`gui-grounding`), drawn at `width` x `height`. Images keep their bytes (PNG or JPEG),
 * named by sha256. A record whose image is missing or not a whole PNG or JPEG, whose size column
 * disagrees with its image, or whose box lies outside it, is refused at plan time in one line
 * naming the file, the record and the field.
 *
 * `utility` (here and on `gui-grounding`) names another source for the utility rows: training
 * reads the task's own corpus whole, and point-in-box accuracy before and after fine-tuning is
 * measured on the other (a benchmark such as ScreenSpot-Pro or OSWorld-G).
 */

/** Where a grounding record's fields are, and how its box is written. */
export interface GroundingFields {
  /** A layout preset whose fields (and Hub repository) are the defaults: screenspot-pro, osworld-g. */
  preset?: GroundingPresetName;
  source: DatasetSourceSpec;
  image: string;
  instruction: string;
  bbox: string;
  /** xyxy: [x0, y0, x1, y1]; xywh: [x, y, width, height]. */
  bbox_format: 'xyxy' | 'xywh';
  /** pixels, or fractions of the image's width and height. */
  bbox_units: 'pixels' | 'fraction';
  /** The image column holds file paths relative to this folder of the dataset ('.' for its root). */
  image_root?: string;
  /** A column holding the image's [width, height] as annotated; checked against the image. */
  image_size?: string;
  /** Only records whose columns equal these values (e.g. OSWorld-G's box_type: bbox). */
  where?: Record<string, string | number | boolean>;
}

export interface GroundingDatasetParams extends GroundingFields {
  train_split: string;
  utility_split: string | null;
  utility_holdout: number;
  /** Size of the synthetic canary screenshots. */
  width: number;
  height: number;
  utility?: GroundingUtilityParams;
}

/** A utility source apart from the training source: its split, and how many rows (default the grid's utility.rows). */
export interface GroundingUtilityParams extends GroundingFields {
  split: string;
  rows?: number;
}

export type GroundingPresetName = 'screenspot-pro' | 'osworld-g';

interface GroundingPreset {
  repo: string;
  files: Record<string, string>;
  split: string;
  fields: Omit<GroundingFields, 'source' | 'preset'>;
}

/**
 * The benchmarks' own layouts (docs/datasets.md says where each was read from):
 * - ScreenSpot-Pro (likaixin/ScreenSpot-Pro): annotations/<application>_<platform>.json, each a
 *   JSON array of records {img_filename, bbox: [x0, y0, x1, y1] in pixels, img_size: [w, h],
 *   instruction, ...}; img_filename is relative to images/.
 * - OSWorld-G: OSWorld-G.json, a JSON array of records {image_path, image_size: [w, h],
 *   instruction, box_type: bbox | polygon | refusal, box_coordinates: [x, y, w, h] for a bbox};
 *   image_path is relative to images/. Only box_type bbox records have a box to score.
 */
export const GROUNDING_PRESETS: Record<GroundingPresetName, GroundingPreset> = {
  'screenspot-pro': {
    repo: 'likaixin/ScreenSpot-Pro',
    files: { test: 'annotations/*.json' },
    split: 'test',
    fields: {
      image: 'img_filename',
      instruction: 'instruction',
      bbox: 'bbox',
      bbox_format: 'xyxy',
      bbox_units: 'pixels',
      image_root: 'images',
      image_size: 'img_size',
    },
  },
  'osworld-g': {
    repo: 'MMInstruction/OSWorld-G',
    files: { test: 'OSWorld-G.json' },
    split: 'test',
    fields: {
      image: 'image_path',
      instruction: 'instruction',
      bbox: 'box_coordinates',
      bbox_format: 'xywh',
      bbox_units: 'pixels',
      image_root: 'images',
      image_size: 'image_size',
      where: { box_type: 'bbox' },
    },
  },
};

export const GROUNDING_PRESET_NAMES = Object.keys(GROUNDING_PRESETS) as GroundingPresetName[];

const FIELD_DEFAULTS: Omit<GroundingFields, 'source' | 'preset'> = {
  image: 'image',
  instruction: 'instruction',
  bbox: 'bbox',
  bbox_format: 'xyxy',
  bbox_units: 'pixels',
};

export const GROUNDING_DEFAULTS: Omit<GroundingDatasetParams, 'source'> = {
  train_split: 'train',
  utility_split: null,
  utility_holdout: 0.1,
  ...FIELD_DEFAULTS,
  width: 640,
  height: 400,
};

function presetOf(written: { preset?: unknown }, field: (string | number)[]): GroundingPreset | undefined {
  if (written.preset === undefined) return undefined;
  const preset = GROUNDING_PRESETS[written.preset as GroundingPresetName];
  if (!preset)
    throw new TaskSpecError(
      `unknown preset ${JSON.stringify(written.preset)}; known: ${GROUNDING_PRESET_NAMES.join(', ')}`,
      [...field, 'preset'],
    );
  return preset;
}

/** The source as written, else the preset's Hub repository; the preset's files unless the source names its own. */
function sourceOf(
  written: { source?: DatasetSourceSpec },
  preset: GroundingPreset | undefined,
  field: (string | number)[],
  what: string,
): DatasetSourceSpec {
  if (!written.source && !preset)
    throw new TaskSpecError(
      `${what} needs a source: {repo: org/name} or {path: ./folder}, or a preset (${GROUNDING_PRESET_NAMES.join(', ')})`,
      [...field, 'source'],
    );
  const source = structuredClone(written.source ?? { repo: preset?.repo as string });
  if (preset && source.files === undefined) source.files = { ...preset.files };
  return source;
}

export function resolveGroundingParams(written: Record<string, unknown>): GroundingDatasetParams {
  const w = written as Partial<GroundingDatasetParams>;
  const preset = presetOf(w, []);
  const source = sourceOf(w, preset, [], 'task grounding');
  const params = {
    ...GROUNDING_DEFAULTS,
    ...(preset ? { ...structuredClone(preset.fields), train_split: preset.split } : {}),
    ...structuredClone(w),
    source,
  } as GroundingDatasetParams;
  if (w.utility !== undefined) params.utility = resolveUtilityParams(w.utility);
  return params;
}

/** A task's `utility` key with its preset's (or the generic) defaults; split defaults to the preset's, else test. */
export function resolveUtilityParams(written: unknown): GroundingUtilityParams {
  const w = written as Partial<GroundingUtilityParams>;
  const preset = presetOf(w, ['utility']);
  const source = sourceOf(w, preset, ['utility'], 'utility');
  return {
    ...FIELD_DEFAULTS,
    ...(preset ? structuredClone(preset.fields) : {}),
    split: preset?.split ?? 'test',
    ...structuredClone(w),
    source,
  } as GroundingUtilityParams;
}

export function groundingSplits(
  p: Pick<GroundingDatasetParams, 'train_split' | 'utility_split' | 'utility'>,
): string[] {
  return p.utility !== undefined || p.utility_split === null || p.utility_split === p.train_split
    ? [p.train_split]
    : [p.train_split, p.utility_split];
}

/** Files to fetch besides the splits': the image folder when records name images by path. */
export function groundingAssets(p: Pick<GroundingFields, 'image_root'>): string[] {
  if (p.image_root === undefined) return [];
  const root = p.image_root.replace(/^\.\/?/, '').replace(/\/+$/, '');
  return [root === '' ? '**' : `${root}/**`];
}

interface DecodedImage {
  bytes: Buffer;
  ext: 'png' | 'jpg';
  width: number;
  height: number;
}

/** The image's format and size; throws a RangeError saying what is wrong with it. */
export function decodeImage(bytes: Buffer): DecodedImage {
  // The header first: a size over the pixel cap (or a zlib bomb's) is refused before any decode.
  const header = checkImageHeader(bytes);
  let ext: 'png' | 'jpg';
  if (header.format === 'png') {
    let chunks;
    try {
      chunks = pngChunks(bytes);
    } catch (error) {
      throw new RangeError(`is a truncated PNG (${(error as Error).message})`);
    }
    if (chunks.at(-1)?.type !== 'IEND') throw new RangeError('is a truncated PNG (no IEND chunk)');
    ext = 'png';
  } else {
    if (bytes[bytes.length - 2] !== 0xff || bytes[bytes.length - 1] !== 0xd9)
      throw new RangeError('is a truncated JPEG (no end-of-image marker)');
    ext = 'jpg';
  }
  const image = new Image();
  image.src = bytes;
  if (!(image.width > 0 && image.height > 0))
    throw new RangeError(`is a ${ext === 'png' ? 'PNG' : 'JPEG'} that cannot be decoded`);
  if (image.width !== header.width || image.height !== header.height)
    throw new RangeError(
      `is a ${ext === 'png' ? 'PNG' : 'JPEG'} whose header says ${header.width}x${header.height} but decodes to ${image.width}x${image.height}`,
    );
  return { bytes, ext, width: image.width, height: image.height };
}

function imageBytes(value: unknown): Buffer | null {
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (value !== null && typeof value === 'object' && 'bytes' in value)
    return imageBytes((value as { bytes: unknown }).bytes);
  return null;
}

function imagePathOf(value: unknown): string | null {
  if (typeof value === 'string') return value;
  const path = (value as { path?: unknown } | null | undefined)?.path;
  return typeof path === 'string' ? path : null;
}

/**
 * The grounding rows of one split of a dataset, keeping records `where` admits: an image part (put
 * in `images`), the instruction, the click at the box's centre and the box in pixels. `origin[j]`
 * is record j's index in the split (for messages); `field` is the key path of these fields in the
 * task value. Throws TaskSpecError naming the file, the record and the field.
 */
function groundingRows(
  p: GroundingFields,
  data: TaskData,
  split: string,
  indices: number[],
  images: ImageStore,
  system: boolean,
  field: (string | number)[],
): TaskExample[] {
  const records = data.splits[split] as DatasetRecord[];
  const prov = data.provenance;
  const dataset =
    prov.source === 'hub'
      ? `${prov.repo}@${(prov.sha ?? prov.revision ?? 'main').slice(0, 12)}`
      : (prov.path ?? 'the local dataset');
  const files = data.recordFiles?.[split] ?? [];
  const root = data.root;
  const shown = (path: string): string =>
    root !== undefined && isAbsolute(path) && path.startsWith(`${root}${sep}`)
      ? relative(root, path).split(sep).join('/')
      : path;
  const where = (k: number): string => {
    let at = k;
    for (const f of files) {
      if (at < f.records) return `${shown(f.path)} record ${at} (split ${split} of ${dataset})`;
      at -= f.records;
    }
    return `row ${k} of split ${split} of ${dataset}`;
  };
  const fail = (k: number, key: keyof GroundingFields, message: string): never => {
    throw new TaskSpecError(`${where(k)}: ${message}`, [...field, key]);
  };
  const cache = new Map<string, DecodedImage>();
  const layout = p.preset
    ? `the ${p.preset} layout (${describeFields(p)})`
    : `the fields this task names (${describeFields(p)})`;
  const column = (
    record: DatasetRecord,
    k: number,
    key: 'image' | 'instruction' | 'bbox' | 'image_size',
    name: string,
  ): unknown => {
    if (!(name in record)) {
      const has = Object.keys(record)
        .slice(0, 12)
        .map((c) => JSON.stringify(c))
        .join(', ');
      fail(
        k,
        key,
        `field ${JSON.stringify(name)} is missing (the record has ${has || 'no fields'}): not ${layout}; set ${key} to the field that holds it${p.preset ? ', or drop the preset' : ''}`,
      );
    }
    return record[name];
  };
  const readImage = (record: DatasetRecord, k: number): DecodedImage => {
    const value = column(record, k, 'image', p.image);
    const bytes = imageBytes(value);
    const path = imagePathOf(value);
    if (bytes) {
      try {
        return decodeImage(bytes);
      } catch (error) {
        if (!(error instanceof RangeError)) throw error;
        return fail(k, 'image', `field ${JSON.stringify(p.image)} ${error.message}; fix or drop the record`);
      }
    }
    if (p.image_root === undefined || path === null) {
      return fail(
        k,
        'image',
        `field ${JSON.stringify(p.image)} holds no image bytes${path !== null ? ` (only the path ${JSON.stringify(path)})` : ''}; store images in the dataset (datasets' Image feature writes {bytes, path})${path !== null ? ', or set image_root to the dataset folder the paths are relative to' : ''}`,
      );
    }
    if (root === undefined)
      return fail(
        k,
        'image',
        `field ${JSON.stringify(p.image)} names the file ${JSON.stringify(path)}, but the dataset has no folder to read it from; name a folder (or a Hub repository) in source`,
      );
    const base = resolve(root, p.image_root);
    const file = resolve(base, path);
    const inDataset = `${p.image_root.replace(/\/+$/, '')}/${path}`.replace(/^\.\//, '');
    if (!file.startsWith(`${base}${sep}`))
      return fail(
        k,
        'image',
        `field ${JSON.stringify(p.image)} names ${JSON.stringify(path)}, outside ${p.image_root}/; image paths are relative to image_root`,
      );
    const known = cache.get(file);
    if (known) return known;
    if (!existsSync(file)) {
      const fix =
        prov.source === 'hub'
          ? `the image is not in the local cache (${file}); fetch the dataset's images where the Hub is reachable: canary-audit datasets fetch <this grid> (it fetches ${groundingAssets(p).join(', ')} with the splits)`
          : `no file ${file}; add it, or set image_root to the folder the paths are relative to`;
      return fail(k, 'image', `field ${JSON.stringify(p.image)} names the image ${JSON.stringify(inDataset)}: ${fix}`);
    }
    let decoded: DecodedImage;
    try {
      // Inside the dataset's folder (a Hub snapshot's links lead to its repository's blobs/), a
      // regular file (a FIFO or /dev/zero is refused, not read), at most MAX_IMAGE_FILE_BYTES.
      const readRoot = prov.source === 'hub' ? resolve(root, '..', '..') : root;
      decoded = decodeImage(
        readInsideSync(readRoot, file, {
          maxBytes: MAX_IMAGE_FILE_BYTES,
          what: 'image',
          fix: "replace it with a regular file inside the dataset's folder, or drop the record",
        }),
      );
    } catch (error) {
      if (error instanceof ReadBoundaryError)
        return fail(
          k,
          'image',
          `field ${JSON.stringify(p.image)} names the image ${JSON.stringify(inDataset)}: ${error.message}`,
        );
      if (!(error instanceof RangeError)) throw error;
      return fail(
        k,
        'image',
        `field ${JSON.stringify(p.image)} names the image ${JSON.stringify(inDataset)}, which ${error.message}; replace the file or drop the record`,
      );
    }
    cache.set(file, decoded);
    return decoded;
  };
  const out: TaskExample[] = [];
  for (const k of indices) {
    const record = records[k] as DatasetRecord;
    if (p.where && !Object.entries(p.where).every(([c, v]) => record[c] === v)) continue;
    const image = readImage(record, k);
    const instruction = column(record, k, 'instruction', p.instruction);
    if (typeof instruction !== 'string' || instruction.trim() === '')
      fail(
        k,
        'instruction',
        `field ${JSON.stringify(p.instruction)} is not a non-empty string (${JSON.stringify(instruction)}); fix or drop the record`,
      );
    if (p.image_size !== undefined) {
      const size = column(record, k, 'image_size', p.image_size);
      if (!Array.isArray(size) || size.length !== 2 || size[0] !== image.width || size[1] !== image.height) {
        fail(
          k,
          'image_size',
          `field ${JSON.stringify(p.image_size)} ${JSON.stringify(size)} is not the image's size [${image.width}, ${image.height}]; the box is in the annotated image's pixels: fix the field or the image`,
        );
      }
    }
    const raw = column(record, k, 'bbox', p.bbox);
    if (!Array.isArray(raw) || raw.length !== 4 || !raw.every((v) => typeof v === 'number' && Number.isFinite(v))) {
      fail(
        k,
        'bbox',
        `field ${JSON.stringify(p.bbox)} must be 4 numbers, got ${JSON.stringify(raw)}${p.where ? '' : '; a record without a box (a polygon, a refusal) can be left out with where'}`,
      );
    }
    let [a, b, c, d] = raw as [number, number, number, number];
    if (p.bbox_format === 'xywh') [c, d] = [a + c, b + d];
    if (p.bbox_units === 'fraction')
      [a, b, c, d] = [a * image.width, b * image.height, c * image.width, d * image.height];
    const box: [number, number, number, number] = [a, b, c, d];
    if (!(a >= 0 && b >= 0 && c <= image.width && d <= image.height && c > a && d > b)) {
      fail(
        k,
        'bbox',
        `field ${JSON.stringify(p.bbox)}: box ${JSON.stringify(box)} (${p.bbox_format}, ${p.bbox_units}) lies outside the ${image.width}x${image.height} image or is empty; check bbox_format and bbox_units, or fix the record`,
      );
    }
    const part: ImagePart = images.put({
      png: image.bytes,
      sha256: sha256Hex(image.bytes),
      width: image.width,
      height: image.height,
      ext: image.ext,
    });
    const prompt: Message[] = [
      ...(system ? [{ role: 'system', content: GUI_SYSTEM } satisfies Message] : []),
      { role: 'user', content: [part, { type: 'text', text: instruction as string }] },
    ];
    out.push({ prompt, target: clickAction(box), box });
  }
  return out;
}

function describeFields(p: GroundingFields): string {
  return `image ${p.image}, instruction ${p.instruction}, bbox ${p.bbox} as ${p.bbox_format} ${p.bbox_units}`;
}

/** A split of the loaded data, or a TaskSpecError naming the key to fix. */
function splitOf(data: TaskData, name: string, field: (string | number)[]): DatasetRecord[] {
  const records = data.splits[name];
  if (!records)
    throw new TaskSpecError(
      `the dataset has no split ${JSON.stringify(name)}; it has ${
        Object.keys(data.splits)
          .map((s) => JSON.stringify(s))
          .join(', ') || 'none'
      }`,
      field,
    );
  if (records.length === 0) throw new TaskSpecError(`split ${name} has no rows`, field);
  return records;
}

/** The utility rows of a task's `utility` source, with what the manifest records of it. */
export interface UtilitySource {
  rows: TaskExample[];
  /** Rows to use, when the task's utility names a count (else the grid's utility.rows). */
  wanted?: number;
  dataset: TaskData['provenance'];
}

export function groundingUtilitySource(
  written: unknown,
  data: TaskData | undefined,
  images: ImageStore,
  system: boolean,
): UtilitySource {
  const p = resolveUtilityParams(written);
  if (!data) throw new TaskSpecError('utility reads a dataset, but none was loaded for it', ['utility', 'source']);
  const records = splitOf(data, p.split, ['utility', 'split']);
  const rows = groundingRows(
    p,
    data,
    p.split,
    records.map((_, k) => k),
    images,
    system,
    ['utility'],
  );
  if (rows.length === 0)
    throw new TaskSpecError(`split ${p.split} has no record that where ${JSON.stringify(p.where)} admits`, [
      'utility',
      'where',
    ]);
  return { rows, ...(p.rows !== undefined ? { wanted: p.rows } : {}), dataset: structuredClone(data.provenance) };
}

/** The task with its utility rows taken from another source (the task's params record `utility`). */
export function withUtilitySource<T extends Task>(task: T, utility: UtilitySource, written: unknown): T {
  return {
    ...task,
    params: { ...task.params, utility: structuredClone(written) },
    utilityRows: utility.rows.length,
    ...(utility.wanted !== undefined ? { utilityRowsWanted: utility.wanted } : {}),
    utilityDataset: utility.dataset,
    rows: (rng, excluded, purpose) => {
      if (purpose === 'train') return task.rows(rng, excluded, purpose);
      const next = epochs(rng, utility.rows.length);
      return () => utility.rows[next()] as TaskExample;
    },
  };
}

export function createGroundingTask(
  written: Record<string, unknown>,
  data: TaskData | undefined,
  utilityData?: TaskData,
): Task {
  const params = resolveGroundingParams(written);
  if (!data) throw new TaskSpecError('task grounding reads a dataset, but none was loaded for it', ['source']);
  if (params.utility !== undefined && written.utility_split !== undefined && written.utility_split !== null) {
    throw new TaskSpecError(
      "utility names the utility rows' own source, so utility_split has nothing to choose; remove one of them",
      ['utility_split'],
    );
  }
  const images = new ImageStore();
  const gui = guiGroundingTask({ width: params.width, height: params.height }, images);
  const p = data.provenance;
  const train = splitOf(data, params.train_split, ['train_split']);
  let trainOrigin = train.map((_, k) => k);
  let utilitySplit: string | null = null;
  let utilityOrigin: number[] = [];
  if (params.utility !== undefined) {
    // The whole train split is trained on; utility rows come from the other source (below).
  } else if (params.utility_split === null || params.utility_split === params.train_split) {
    // The same seeded hold-out as the text dataset task: fixed by the files' content.
    const order = new Rng('utility-holdout', canonicalJson(p.files.map((f) => f.sha256)), params.train_split).shuffle(
      train.map((_, k) => k),
    );
    const held = Math.round(params.utility_holdout * train.length);
    if (held < 1 || held >= train.length)
      throw new TaskSpecError(
        `utility_holdout ${params.utility_holdout} of ${train.length} rows holds out ${held}; name a utility_split or change the fraction`,
        ['utility_holdout'],
      );
    const out = new Set(order.slice(0, held));
    utilityOrigin = order.slice(0, held).sort((x, y) => x - y);
    trainOrigin = trainOrigin.filter((k) => !out.has(k));
    utilitySplit = params.train_split;
  } else {
    utilitySplit = params.utility_split;
    utilityOrigin = splitOf(data, utilitySplit, ['utility_split']).map((_, k) => k);
  }
  const trainRows = groundingRows(params, data, params.train_split, trainOrigin, images, true, []);
  if (trainRows.length === 0)
    throw new TaskSpecError(
      `split ${params.train_split} has no record that where ${JSON.stringify(params.where)} admits`,
      ['where'],
    );
  const utilityRows =
    utilitySplit === null ? [] : groundingRows(params, data, utilitySplit, utilityOrigin, images, true, []);
  const { utility: _utility, ...recorded } = params;
  const task: Task = {
    name: 'grounding',
    params: recorded,
    metrics: ['loss', 'point_in_box', 'parse_rate'],
    utilityRows: utilityRows.length,
    trainRows: trainRows.length,
    dataset: structuredClone(p),
    images,
    drawIdentity: gui.drawIdentity,
    renderIdentity: gui.renderIdentity,
    drawMessage: gui.drawMessage,
    rows: (rng, _excluded, purpose) => {
      const rows = purpose === 'train' ? trainRows : utilityRows;
      const next = epochs(rng, rows.length);
      return () => rows[next()] as TaskExample;
    },
    canary: gui.canary,
  };
  if (params.utility === undefined) {
    if (utilityRows.length === 0)
      throw new TaskSpecError(
        `no utility record is left after where ${JSON.stringify(params.where)}; name a utility_split or a utility source`,
        ['where'],
      );
    return task;
  }
  return withUtilitySource(task, groundingUtilitySource(written.utility, utilityData, images, true), written.utility);
}

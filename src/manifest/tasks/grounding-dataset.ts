import { Image } from '@napi-rs/canvas';
import type { DatasetRecord, DatasetSourceSpec, ImagePart, Message, TaskData } from '../../contracts/index.js';
import { canonicalJson, sha256Hex } from '../../hash.js';
import { Rng } from '../../random.js';
import { ImageStore, pngChunks } from '../images/index.js';
import { epochs } from './dataset/task.js';
import { TaskSpecError } from './dataset/records.js';
import { clickAction, GUI_SYSTEM, guiGroundingTask } from './gui-grounding/index.js';
import type { Task, TaskExample } from './task.js';

/**
 * GUI grounding rows from a dataset: each record an image column (`{bytes, path}` as `datasets`
 * writes an Image feature to Parquet, or the bytes themselves), an instruction and a target box.
 * The reply is the click action at the box's centre, the row's `box` the box in image pixels, so
 * utility is point-in-box accuracy as for the synthetic task. Canaries are the synthetic typing
 * task's (`gui-grounding`), drawn at `width` x `height`. Images keep their bytes (PNG or JPEG),
 * named by sha256; a record without image bytes, with bytes that are not a whole PNG or JPEG, or
 * with a box outside its image is refused at plan time, naming the split, the row and the field.
 */
export interface GroundingDatasetParams {
  source: DatasetSourceSpec;
  train_split: string;
  utility_split: string | null;
  utility_holdout: number;
  image: string;
  instruction: string;
  bbox: string;
  /** xyxy: [x0, y0, x1, y1]; xywh: [x, y, width, height]. */
  bbox_format: 'xyxy' | 'xywh';
  /** pixels, or fractions of the image's width and height. */
  bbox_units: 'pixels' | 'fraction';
  /** Size of the synthetic canary screenshots. */
  width: number;
  height: number;
}

export const GROUNDING_DEFAULTS: Omit<GroundingDatasetParams, 'source'> = {
  train_split: 'train',
  utility_split: null,
  utility_holdout: 0.1,
  image: 'image',
  instruction: 'instruction',
  bbox: 'bbox',
  bbox_format: 'xyxy',
  bbox_units: 'pixels',
  width: 640,
  height: 400,
};

export function resolveGroundingParams(written: Record<string, unknown>): GroundingDatasetParams {
  const w = written as Partial<GroundingDatasetParams>;
  if (!w.source) throw new TaskSpecError('task grounding needs a source: {repo: org/name} or {path: ./folder}', ['source']);
  return { ...GROUNDING_DEFAULTS, ...structuredClone(w), source: structuredClone(w.source) } as GroundingDatasetParams;
}

export function groundingSplits(p: Pick<GroundingDatasetParams, 'train_split' | 'utility_split'>): string[] {
  return p.utility_split === null || p.utility_split === p.train_split ? [p.train_split] : [p.train_split, p.utility_split];
}

interface DecodedImage {
  bytes: Buffer;
  ext: 'png' | 'jpg';
  width: number;
  height: number;
}

/** The image's format and size; throws a RangeError saying what is wrong with it. */
export function decodeImage(bytes: Buffer): DecodedImage {
  let ext: 'png' | 'jpg';
  if (bytes.length >= 8 && bytes[0] === 0x89 && bytes.toString('latin1', 1, 4) === 'PNG') {
    let chunks;
    try {
      chunks = pngChunks(bytes);
    } catch (error) {
      throw new RangeError(`is a truncated PNG (${(error as Error).message})`);
    }
    if (chunks.at(-1)?.type !== 'IEND') throw new RangeError('is a truncated PNG (no IEND chunk)');
    ext = 'png';
  } else if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8) {
    if (bytes[bytes.length - 2] !== 0xff || bytes[bytes.length - 1] !== 0xd9) throw new RangeError('is a truncated JPEG (no end-of-image marker)');
    ext = 'jpg';
  } else throw new RangeError('is neither a PNG nor a JPEG');
  const image = new Image();
  image.src = bytes;
  if (!(image.width > 0 && image.height > 0)) throw new RangeError(`is a ${ext === 'png' ? 'PNG' : 'JPEG'} that cannot be decoded`);
  return { bytes, ext, width: image.width, height: image.height };
}

function imageBytes(value: unknown): Buffer | null {
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (value !== null && typeof value === 'object' && 'bytes' in value) return imageBytes((value as { bytes: unknown }).bytes);
  return null;
}

export function createGroundingTask(written: Record<string, unknown>, data: TaskData | undefined): Task {
  const params = resolveGroundingParams(written);
  if (!data) throw new TaskSpecError('task grounding reads a dataset, but none was loaded for it', ['source']);
  const images = new ImageStore();
  const gui = guiGroundingTask({ width: params.width, height: params.height }, images);
  const p = data.provenance;
  const describe = (split: string): string => `split ${split} of ${p.source === 'hub' ? `${p.repo}@${(p.sha ?? p.revision ?? 'main').slice(0, 12)}` : (p.path ?? 'the local dataset')}`;
  const split = (name: string, field: string): DatasetRecord[] => {
    const records = data.splits[name];
    if (!records) throw new TaskSpecError(`the dataset has no split ${JSON.stringify(name)}; it has ${Object.keys(data.splits).map((s) => JSON.stringify(s)).join(', ') || 'none'}`, [field]);
    if (records.length === 0) throw new TaskSpecError(`${describe(name)} has no rows`, [field]);
    return records;
  };
  const row = (record: DatasetRecord, k: number, name: string): TaskExample => {
    const where = `row ${k} of ${describe(name)}`;
    const bytes = imageBytes(record[params.image]);
    if (!bytes) {
      const path = (record[params.image] as { path?: unknown } | undefined)?.path;
      throw new TaskSpecError(`${where}: column ${JSON.stringify(params.image)} holds no image bytes${typeof path === 'string' ? ` (only the path ${JSON.stringify(path)})` : ''}; store images in the dataset (datasets' Image feature writes {bytes, path})`, ['image']);
    }
    let image: DecodedImage;
    try {
      image = decodeImage(bytes);
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      throw new TaskSpecError(`${where}: column ${JSON.stringify(params.image)} ${error.message}; fix or drop the row`, ['image']);
    }
    const instruction = record[params.instruction];
    if (typeof instruction !== 'string' || instruction.trim() === '') throw new TaskSpecError(`${where}: column ${JSON.stringify(params.instruction)} is not a non-empty string`, ['instruction']);
    const raw = record[params.bbox];
    if (!Array.isArray(raw) || raw.length !== 4 || !raw.every((v) => typeof v === 'number' && Number.isFinite(v))) {
      throw new TaskSpecError(`${where}: column ${JSON.stringify(params.bbox)} must be 4 numbers, got ${JSON.stringify(raw)}`, ['bbox']);
    }
    let [a, b, c, d] = raw as [number, number, number, number];
    if (params.bbox_format === 'xywh') [c, d] = [a + c, b + d];
    if (params.bbox_units === 'fraction') [a, b, c, d] = [a * image.width, b * image.height, c * image.width, d * image.height];
    const box: [number, number, number, number] = [a, b, c, d];
    if (!(a >= 0 && b >= 0 && c <= image.width && d <= image.height && c > a && d > b)) {
      throw new TaskSpecError(`${where}: box ${JSON.stringify(box)} (${params.bbox_format}, ${params.bbox_units}) lies outside the ${image.width}x${image.height} image or is empty; check bbox_format and bbox_units`, ['bbox']);
    }
    const part: ImagePart = images.put({ png: image.bytes, sha256: sha256Hex(image.bytes), width: image.width, height: image.height, ext: image.ext });
    const prompt: Message[] = [
      { role: 'system', content: GUI_SYSTEM },
      { role: 'user', content: [part, { type: 'text', text: instruction }] },
    ];
    return { prompt, target: clickAction(box), box };
  };
  let train = split(params.train_split, 'train_split');
  let trainOrigin = train.map((_, k) => k);
  let utility: DatasetRecord[];
  let utilityOrigin: number[];
  if (params.utility_split === null || params.utility_split === params.train_split) {
    // The same seeded hold-out as the text dataset task: fixed by the files' content.
    const order = new Rng('utility-holdout', canonicalJson(p.files.map((f) => f.sha256)), params.train_split).shuffle(train.map((_, k) => k));
    const held = Math.round(params.utility_holdout * train.length);
    if (held < 1 || held >= train.length) throw new TaskSpecError(`utility_holdout ${params.utility_holdout} of ${train.length} rows holds out ${held}; name a utility_split or change the fraction`, ['utility_holdout']);
    const out = new Set(order.slice(0, held));
    utilityOrigin = order.slice(0, held).sort((x, y) => x - y);
    utility = utilityOrigin.map((k) => train[k] as DatasetRecord);
    trainOrigin = trainOrigin.filter((k) => !out.has(k));
    train = trainOrigin.map((k) => train[k] as DatasetRecord);
  } else {
    utility = split(params.utility_split, 'utility_split');
    utilityOrigin = utility.map((_, k) => k);
  }
  const trainRows = train.map((r, j) => row(r, trainOrigin[j] as number, params.train_split));
  const utilityRows = utility.map((r, j) => row(r, utilityOrigin[j] as number, params.utility_split ?? params.train_split));
  return {
    name: 'grounding',
    params: { ...params },
    metrics: ['loss', 'point_in_box', 'parse_rate'],
    utilityRows: utilityRows.length,
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
}

import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { taskDataLoader } from '../../src/app/index.js';
import { messageImages, messageText, type Row } from '../../src/contracts/index.js';
import { UserInputErrors } from '../../src/errors.js';
import { planAudit, writeAudit } from '../../src/manifest/index.js';
import { groundingScreenshot, writeGroundingParquet, type GroundingRecord } from './plan-digest.js';
import { verifyRunFolder } from './verify-run.js';

/**
 * GUI grounding rows from a dataset laid out like a Hub repository that `datasets` wrote: a card
 * (README.md) declaring an Image feature, and data/train-*.parquet whose image column is the
 * {bytes, path} struct `datasets` stores.
 */
const root = mkdtempSync(join(tmpdir(), 'canary-grounding-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const CARD = `---
dataset_info:
  features:
  - name: image
    dtype: image
  - name: instruction
    dtype: string
  - name: bbox
    sequence: float64
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
---
# grounding fixture
`;

function writeDataset(dir: string, records: GroundingRecord[]): void {
  writeGroundingParquet(dir, records, CARD);
}

const records = (n: number): GroundingRecord[] =>
  Array.from({ length: n }, (_, k) => ({
    image: { bytes: new Uint8Array(groundingScreenshot(k)), path: `shot${k}.png` },
    instruction: `Click the dark box ${k}.`,
    bbox: [(10 + k) / (200 + k), 20 / 120, 40 / (200 + k), 16 / 120],
  }));

const grid = (extra = ''): string => `name: grounding-small
seed: 3
axes:
  visibility: [redacted]
  dose: [2]
  model: [qwen3-0.6b]
  task: [{name: grounding, source: {path: ./ds}, bbox_format: xywh, bbox_units: fraction, width: 320, height: 200${extra}}]
training: {batch_size: 4, updates: 8, lr: 0.0001, max_length: 2048}
canaries: {focal: 2, held_out: 1, code: {alphabet: ABCDEFGHJKLMNPQRSTUVWXYZ23456789, length: 6}}
candidates: {kind: sampled, decoys: 49}
utility: {rows: 100}
`;

async function plan(dir: string, text: string) {
  const gridPath = join(dir, 'grid.yaml');
  writeFileSync(gridPath, text);
  return planAudit(gridPath, { loadTaskData: taskDataLoader(gridPath, { offline: true }) });
}

describe('task grounding (a dataset with an Image column)', () => {
  it("trains on the dataset's images, boxes in pixels, and writes every image beside the rows", async () => {
    const dir = join(root, 'ok');
    writeDataset(join(dir, 'ds'), records(20));
    const written = await writeAudit(await plan(dir, grid()), join(dir, 'out'));
    const { manifest, rows } = verifyRunFolder(written.runs[0]!.runDir);
    expect(manifest.task.dataset).toMatchObject({ source: 'local' });
    expect(manifest.utility?.count).toBe(2); // 10% of 20 held out
    const datasetShas = new Set(records(20).map((r) => createHash('sha256').update(r.image.bytes!).digest('hex')));
    const background = rows.filter((r) => r.kind === 'background');
    for (const row of background) {
      const [image] = messageImages(row.prompt);
      expect(datasetShas.has(image!.sha256)).toBe(true);
      const k = Number(/box (\d+)\./.exec(messageText(row.prompt.at(-1)!))![1]);
      expect(row.box?.map((v) => Math.round(v * 1000) / 1000)).toEqual([10 + k, 20, 50 + k, 36]);
      expect(row.target).toBe(`click(x=${30 + k}, y=28)`);
    }
    const canary = rows.find((r) => r.kind === 'canary') as Row;
    expect(messageImages(canary.prompt)[0]?.width).toBe(320);
    for (const ref of manifest.images ?? [])
      expect(
        createHash('sha256')
          .update(readFileSync(join(written.runs[0]!.runDir, ref.path)))
          .digest('hex'),
      ).toBe(ref.sha256);
    expect(manifest.utility?.metrics).toEqual(['loss', 'point_in_box', 'parse_rate']);
  });

  const refused = async (
    name: string,
    edit: (r: GroundingRecord[]) => void,
    extra = '',
  ): Promise<{ message: string; field: string | undefined }> => {
    const dir = join(root, name);
    const rs = records(6);
    edit(rs);
    writeDataset(join(dir, 'ds'), rs);
    const error = await plan(dir, grid(extra)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserInputErrors);
    const errors = (error as UserInputErrors).errors;
    expect(errors).toHaveLength(1);
    return { message: errors[0]!.message, field: errors[0]!.field };
  };

  it('refuses a corrupt image, a missing one and a box outside the image, naming the file, the record and the field', async () => {
    const corrupt = await refused('corrupt', (rs) => (rs[3]!.image.bytes = rs[3]!.image.bytes!.subarray(0, 100)));
    expect(corrupt.message).toMatch(
      /: data\/train-00000-of-00001\.parquet record 3 \(split train of .*ds\): field "image" is a truncated PNG \(truncated PNG chunk at byte \d+\); fix or drop the record$/,
    );
    expect(corrupt.field).toBe('axes.task[0].image');
    const junk = await refused('junk', (rs) => (rs[1]!.image.bytes = new TextEncoder().encode('not an image')));
    expect(junk.message).toMatch(/parquet record 1 .*field "image" is neither a PNG nor a JPEG/);
    const missing = await refused('missing', (rs) => (rs[2]!.image.bytes = null));
    expect(missing.message).toMatch(
      /parquet record 2 .*holds no image bytes \(only the path "shot2.png"\);.* or set image_root to the dataset folder the paths are relative to$/,
    );
    const outside = await refused('outside', (rs) => (rs[4]!.bbox = [0.9, 0.5, 0.5, 0.1]));
    expect(outside.message).toMatch(
      /parquet record 4 .*field "bbox": box \[.*\] \(xywh, fraction\) lies outside the 204x120 image/,
    );
    expect(outside.field).toBe('axes.task[0].bbox');
  });
});

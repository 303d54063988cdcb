import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { taskDataLoader } from '../../src/app/index.js';
import { canonicalJson } from '../../src/hash.js';
import {
  buildManifestCore,
  planAudit,
  runRenderer,
  trainingRowLines,
  utilityRowLines,
  type AuditPlan,
} from '../../src/manifest/index.js';
import { renderPng } from '../../src/manifest/images/index.js';

/**
 * What a plan would write, as one sha256 per run: the manifest core (everything but the run id,
 * the rows' hashes and provenance), then (unless `cores`) every training row and utility row. The
 * folders in `replace` are written as their names, so a digest does not depend on where the
 * repository or a scratch folder sits. Used to pin that existing grids plan byte-identical
 * manifests across changes (test/manifest/grounding-benchmarks.test.ts).
 */
export function planDigests(
  plan: AuditPlan,
  replace: Record<string, string>,
  options: { cores?: boolean } = {},
): string[] {
  const clean = (s: string): string => Object.entries(replace).reduce((t, [from, to]) => t.split(from).join(to), s);
  return plan.runs.map((layout) => {
    const hash = createHash('sha256');
    hash.update(clean(canonicalJson(buildManifestCore(plan.grid, plan.auditId, plan.pool, layout))));
    if (!options.cores) {
      const renderer = runRenderer(plan.grid, layout);
      for (const line of trainingRowLines(plan.grid, plan.pool, layout, renderer))
        hash.update(clean(line)).update('\n');
      for (const line of utilityRowLines(plan.grid, plan.pool, renderer)) hash.update(clean(line)).update('\n');
    }
    return hash.digest('hex');
  });
}

export async function planFile(gridPath: string): Promise<AuditPlan> {
  return planAudit(gridPath, { loadTaskData: taskDataLoader(gridPath, { offline: true }) });
}

/** A synthetic screenshot: white, with a dark 40x16 box at x = 10 + k (k shifts the width too). */
export function groundingScreenshot(k: number): Buffer {
  return renderPng(200 + k, 120, (g) => {
    g.fillStyle = '#ffffff';
    g.fillRect(0, 0, 200 + k, 120);
    g.fillStyle = '#222222';
    g.fillRect(10 + k, 20, 40, 16);
  }).png;
}

/** One record of a grounding dataset: the image struct `datasets` stores, an instruction, a box. */
export interface GroundingRecord {
  image: { bytes: Uint8Array | null; path: string | null };
  instruction: string;
  bbox: number[];
}

const PLAIN_CARD =
  '---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n---\n';

/** A grounding dataset as `datasets` writes one: a README card and data/train-*.parquet with an Image column. */
export function writeGroundingParquet(dir: string, records: GroundingRecord[], card = PLAIN_CARD): void {
  mkdirSync(join(dir, 'data'), { recursive: true });
  writeFileSync(join(dir, 'README.md'), card);
  const buffer = parquetWriteBuffer({
    columnData: [
      { name: 'image', data: records.map((r) => r.image) },
      { name: 'instruction', data: records.map((r) => r.instruction) },
      { name: 'bbox', data: records.map((r) => r.bbox) },
    ],
    schema: [
      { name: 'root', num_children: 3 },
      { name: 'image', repetition_type: 'OPTIONAL', num_children: 2 },
      { name: 'bytes', type: 'BYTE_ARRAY', repetition_type: 'OPTIONAL' },
      { name: 'path', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      { name: 'instruction', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
      { name: 'bbox', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', type: 'DOUBLE', repetition_type: 'OPTIONAL' },
    ],
  });
  writeFileSync(join(dir, 'data', 'train-00000-of-00001.parquet'), Buffer.from(buffer));
}

/** The pinned grids' grounding dataset: 12 screenshots, boxes in pixels (x0, y0, x1, y1). */
export function writeParquetGrounding(dir: string): void {
  writeGroundingParquet(
    dir,
    Array.from({ length: 12 }, (_, k) => ({
      image: { bytes: new Uint8Array(groundingScreenshot(k)), path: `shot${k}.png` },
      instruction: `Click the dark box ${k}.`,
      bbox: [10 + k, 20, 50 + k, 36],
    })),
  );
}

/** Grids planned before a utility source apart existed; their digests are pinned. */
export const EXISTING_GRIDS: Record<string, string> = {
  'gui-grounding': `name: pin-gui
seed: 4
axes:
  visibility: [visible, redacted]
  dose: [2]
  model: [tiny-vlm]
  task: [{name: gui-grounding, width: 320, height: 200, style: compact}]
training: {batch_size: 4, updates: 4, lr: 0.001}
canaries: {focal: 2, held_out: 1, code: {alphabet: ABCDEFGHJKLMNPQRSTUVWXYZ23456789, length: 6}}
candidates: {kind: sampled, decoys: 49}
utility: {rows: 3}
`,
  grounding: `name: pin-grounding
seed: 3
axes:
  visibility: [redacted]
  dose: [2]
  model: [qwen3-0.6b]
  task: [{name: grounding, source: {path: ./ds}, width: 320, height: 200}, {name: grounding, source: {path: ./ds}, utility_holdout: 0.25, label: g25}]
training: {batch_size: 4, updates: 4, lr: 0.0001, max_length: 2048}
canaries: {focal: 2, held_out: 1, code: {alphabet: ABCDEFGHJKLMNPQRSTUVWXYZ23456789, length: 6}}
candidates: {kind: sampled, decoys: 49}
utility: {rows: 100}
`,
  banking77: `name: pin-banking77
seed: 5
axes:
  visibility: [visible]
  dose: [1, 4]
  task: [{name: banking77, source: {path: ./banking77-mini}, system: null}]
training: {batch_size: 4, updates: 6, lr: 0.001}
canaries: {focal: 2, held_out: 2}
utility: {rows: 8}
`,
};

/**
 * The digests of every grid above. A task's absolute source path seeds its rows (the task value is
 * part of the stream's key), so the grids and their datasets are planned from one fixed folder,
 * `dir` (emptied first), with banking77-mini copied into it from the repository at `repo`.
 */
export async function existingDigests(repo: string, dir: string): Promise<Record<string, string[]>> {
  rmSync(dir, { recursive: true, force: true });
  writeParquetGrounding(join(dir, 'ds'));
  cpSync(join(repo, 'test', 'fixtures', 'datasets', 'banking77-mini'), join(dir, 'banking77-mini'), {
    recursive: true,
  });
  const out: Record<string, string[]> = {};
  for (const [name, text] of Object.entries(EXISTING_GRIDS)) {
    const path = join(dir, `${name}.yaml`);
    writeFileSync(path, text);
    out[name] = planDigests(await planFile(path), {});
  }
  return out;
}

/** The fixed folder the pinned digests are planned from (a task's absolute source path is part of its rows' seed). */
export const PINNED_DIR = '/tmp/canary-audit-pinned-digests';

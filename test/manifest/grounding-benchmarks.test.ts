import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fetchDatasetToCache, gridDatasetRequests, taskDataLoader } from '../../src/app/index.js';
import { messageImages, messageText, type Row } from '../../src/contracts/index.js';
import { UserInputErrors } from '../../src/errors.js';
import {
  buildManifestCore,
  planAudit,
  runRenderer,
  trainingRowLines,
  utilityRowLines,
  writeAudit,
  type AuditPlan,
} from '../../src/manifest/index.js';
import { verifyRunFolder } from './verify-run.js';
import { FIXTURES_DIR } from '../fixtures/datasets/build.js';
import { datasetRepo, startDatasetHub } from '../hub/dataset-fixture.js';
import { existingDigests, PINNED_DIR } from './plan-digest.js';

/**
 * Grounding utility on benchmarks laid out like ScreenSpot-Pro and OSWorld-G (the fixtures
 * screenspot-pro-mini/ and osworld-g-mini/), as a utility source apart from the training source.
 */
const root = mkdtempSync(join(tmpdir(), 'canary-grounding-bench-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const SSP = join(FIXTURES_DIR, 'screenspot-pro-mini');
const OSG = join(FIXTURES_DIR, 'osworld-g-mini');
const sha = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

interface SspRecord {
  img_filename: string;
  bbox: number[];
  img_size: number[];
  instruction: string;
}
interface OsgRecord {
  image_path: string;
  box_type: string;
  box_coordinates: number[];
  instruction: string;
}
const sspRecords = (dir = SSP): SspRecord[] =>
  ['photoshop_windows', 'vscode_macos'].flatMap(
    (f) => JSON.parse(readFileSync(join(dir, 'annotations', `${f}.json`), 'utf8')) as SspRecord[],
  );
const osgRecords = (): OsgRecord[] => JSON.parse(readFileSync(join(OSG, 'OSWorld-G.json'), 'utf8')) as OsgRecord[];

const grid = (task: string, extra = ''): string => `name: bench
seed: 7
axes:
  visibility: [redacted]
  dose: [2]
  model: [qwen3-0.6b]
  task: [${task}]
training: {batch_size: 4, updates: 4, lr: 0.0001, max_length: 2048}
canaries: {focal: 2, held_out: 1, code: {alphabet: ABCDEFGHJKLMNPQRSTUVWXYZ23456789, length: 6}}
candidates: {kind: sampled, decoys: 49}
utility: {rows: 50}
${extra}`;

async function plan(
  name: string,
  text: string,
  hub: { hubUrl?: string; cacheDir?: string; offline?: boolean } = { offline: true },
): Promise<AuditPlan> {
  const gridPath = join(root, `${name}.yaml`);
  writeFileSync(gridPath, text);
  return planAudit(gridPath, { loadTaskData: taskDataLoader(gridPath, hub) });
}

function utilityRows(p: AuditPlan, run = 0): Row[] {
  const layout = p.runs[run]!;
  return [...utilityRowLines(p.grid, p.pool, runRenderer(p.grid, layout))].map((l) => JSON.parse(l) as Row);
}

/** Each utility row against its record: the image's sha256 is the file's, the box the record's (in pixels), the instruction the record's. */
function expectRowsOf(rows: Row[], expected: { instruction: string; image: string; box: number[] }[]): void {
  expect(rows).toHaveLength(expected.length);
  const byInstruction = new Map(expected.map((e) => [e.instruction, e]));
  for (const row of rows) {
    const text = messageText(row.prompt.at(-1)!);
    const want = byInstruction.get(text);
    expect(want, text).toBeDefined();
    const [image] = messageImages(row.prompt);
    expect(image!.sha256).toBe(sha(readFileSync(want!.image)));
    expect([image!.width, image!.height]).toEqual([320, 180]);
    expect(row.box).toEqual(want!.box);
    const [x0, y0, x1, y1] = want!.box as [number, number, number, number];
    expect(row.target).toBe(`click(x=${Math.round((x0 + x1) / 2)}, y=${Math.round((y0 + y1) / 2)})`);
    byInstruction.delete(text);
  }
}

const sspExpected = (): { instruction: string; image: string; box: number[] }[] =>
  sspRecords().map((r) => ({ instruction: r.instruction, image: join(SSP, 'images', r.img_filename), box: r.bbox }));
const osgExpected = (): { instruction: string; image: string; box: number[] }[] =>
  osgRecords()
    .filter((r) => r.box_type === 'bbox')
    .map((r) => {
      const [x, y, w, h] = r.box_coordinates as [number, number, number, number];
      return { instruction: r.instruction, image: join(OSG, 'images', r.image_path), box: [x, y, x + w, y + h] };
    });

describe('grounding utility from a source apart from the training source', () => {
  it('existing grids plan byte-identical manifests and rows (digests pinned before utility sources existed)', {
    timeout: 60_000,
  }, async () => {
    // The same digests came from this helper at the commit before (ff3fe97), planned from the same folder.
    const digests = await existingDigests(join(FIXTURES_DIR, '..', '..', '..'), PINNED_DIR);
    expect(digests).toEqual({
      'gui-grounding': [
        '36d67c90c88ffef86b9b718ccc55c4cce4d5c912f6ca21ea4f98cc8f05ac8c74',
        'a784d4c643eecf942d30623963fc83e045b05d64de6afa204d8d0f25bc804658',
      ],
      grounding: [
        'a9c493cd288858d0e1229ec9a933033dbbf0fc9ff24e961a8f83cfd97d58876d',
        'f6328dd48aabde36626e34c1716fb2eb9e3fd0f82d484d29fd2371cc715047a7',
      ],
      banking77: [
        '7ab30737110b04b270ef21b5e9fca31c7f303a803ec4879dada4f84b29f6e3fc',
        'c953fc3ea23f30022a058d5e389733da3195efd52e92d092ac61b97b84c7da3c',
      ],
    });
  });

  it('gui-grounding trains on synthetic screenshots; ScreenSpot-Pro (local folder) gives the utility rows', async () => {
    const p = await plan(
      'gui-ssp',
      grid(`{name: gui-grounding, width: 320, height: 200, utility: {preset: screenspot-pro, source: {path: ${SSP}}}}`),
    );
    expectRowsOf(utilityRows(p), sspExpected());
    const core = buildManifestCore(p.grid, p.auditId, p.pool, p.runs[0]!);
    expect(core.task.params?.utility).toEqual({ preset: 'screenspot-pro', source: { path: SSP } });
    expect(core.task.dataset).toBeUndefined();
    expect(core.task.utility_dataset?.files.map((f) => [f.split, f.path.slice(SSP.length)])).toEqual([
      ['test', '/annotations/photoshop_windows.json'],
      ['test', '/annotations/vscode_macos.json'],
    ]);
    // Naming a utility source changes the utility rows only: the training rows are the same as without it.
    const without = await plan('gui-plain', grid('{name: gui-grounding, width: 320, height: 200}'));
    const training = (q: AuditPlan): string[] => [
      ...trainingRowLines(q.grid, q.pool, q.runs[0]!, runRenderer(q.grid, q.runs[0]!)),
    ];
    expect(training(p)).toEqual(training(without));
    expect(utilityRows(without).map((r) => messageText(r.prompt.at(-1)!))).not.toEqual(
      utilityRows(p).map((r) => messageText(r.prompt.at(-1)!)),
    );
    // Written: the manifest (schema-valid) records the utility source, and every image the utility rows show sits beside them.
    const written = await writeAudit(p, join(root, 'out-gui-ssp'));
    const runDir = written.runs[0]!.runDir;
    const { manifest } = verifyRunFolder(runDir);
    expect(manifest.task.utility_dataset?.source).toBe('local');
    expect(manifest.utility?.count).toBe(6);
    const lines = readFileSync(join(runDir, manifest.utility!.path), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Row);
    for (const row of lines) {
      const [image] = messageImages(row.prompt);
      expect(sha(readFileSync(join(runDir, image!.path)))).toBe(image!.sha256);
      expect(manifest.images?.some((i) => i.sha256 === image!.sha256)).toBe(true);
    }
    // utility.rows on the task overrides the grid's utility.rows.
    const three = await plan(
      'gui-ssp-3',
      grid(
        `{name: gui-grounding, width: 320, height: 200, utility: {preset: screenspot-pro, source: {path: ${SSP}}, rows: 3}}`,
      ),
    );
    expect(utilityRows(three)).toHaveLength(3);
  });

  it('grounding trains on ScreenSpot-Pro whole and measures utility on OSWorld-G: bbox records only, [x, y, w, h] to corners', async () => {
    const p = await plan(
      'ssp-osg',
      grid(
        `{name: grounding, preset: screenspot-pro, source: {path: ${SSP}}, width: 320, height: 200, utility: {preset: osworld-g, source: {path: ${OSG}}}}`,
      ),
    );
    expectRowsOf(utilityRows(p), osgExpected());
    expect(osgExpected()).toHaveLength(4); // of 6: the polygon and the refusal have no box to score
    const task = runRenderer(p.grid, p.runs[0]!).task;
    expect(task.utilityRows).toBe(4);
    const train = task.rows(new (await import('../../src/random.js')).Rng('t'), new Set(), 'train');
    const seen = new Set(Array.from({ length: 6 }, () => messageText(train().prompt.at(-1)!)));
    expect([...seen].sort()).toEqual(
      sspRecords()
        .map((r) => r.instruction)
        .sort(),
    ); // all 6 records trained on, none held out
    const core = buildManifestCore(p.grid, p.auditId, p.pool, p.runs[0]!);
    expect(core.task.dataset?.files.map((f) => f.path.slice(SSP.length))).toEqual([
      '/annotations/photoshop_windows.json',
      '/annotations/vscode_macos.json',
    ]);
    expect(core.task.utility_dataset?.files.map((f) => f.path.slice(OSG.length))).toEqual(['/OSWorld-G.json']);
  });

  it('ScreenSpot-Pro as the training source with its own hold-out, as any grounding dataset', async () => {
    const p = await plan(
      'ssp-holdout',
      grid(
        `{name: grounding, preset: screenspot-pro, source: {path: ${SSP}}, utility_holdout: 0.34, width: 320, height: 200}`,
      ),
    );
    const rows = utilityRows(p);
    expect(rows).toHaveLength(2); // round(0.34 * 6)
    const all = sspExpected();
    expectRowsOf(
      rows,
      all.filter((e) => rows.some((r) => messageText(r.prompt.at(-1)!) === e.instruction)),
    );
  });

  it('a Hub source: datasets fetch GRID puts the annotations and the images in the cache, then the grid plans offline', async () => {
    const repoSha = '55'.repeat(20);
    const hub = await startDatasetHub({
      'likaixin/ScreenSpot-Pro': datasetRepo('screenspot-pro-mini', { sha: repoSha }),
    });
    try {
      const cacheDir = join(root, 'hf-cache');
      const gridPath = join(root, 'gui-ssp-hub.yaml');
      writeFileSync(
        gridPath,
        grid('{name: gui-grounding, width: 320, height: 200, utility: {preset: screenspot-pro}}'),
      );
      const offline = await plan(
        'gui-ssp-hub',
        grid('{name: gui-grounding, width: 320, height: 200, utility: {preset: screenspot-pro}}'),
        { hubUrl: hub.url, cacheDir, offline: true },
      ).catch((e: unknown) => e);
      expect((offline as UserInputErrors).errors[0]!.message).toMatch(
        / is not in the local cache .*canary-audit datasets fetch likaixin\/ScreenSpot-Pro; this task reads images\/\*\* too, which canary-audit datasets fetch .*gui-ssp-hub\.yaml fetches with the splits$/,
      );
      expect((offline as UserInputErrors).errors[0]!.field).toBe('axes.task[0].utility.source.repo');
      const requests = await gridDatasetRequests(gridPath);
      expect(requests).toEqual([
        {
          repo: 'likaixin/ScreenSpot-Pro',
          revision: null,
          splits: ['test'],
          files: { test: 'annotations/*.json' },
          assets: ['images/**'],
        },
      ]);
      const fetched = await fetchDatasetToCache(requests[0]!, { hubUrl: hub.url, cacheDir, accessToken: null });
      expect(fetched.sha).toBe(repoSha);
      expect(fetched.downloadedFiles).toBe(7); // README.md, 2 annotation files, 4 images
      const p = await plan(
        'gui-ssp-hub',
        grid('{name: gui-grounding, width: 320, height: 200, utility: {preset: screenspot-pro}}'),
        { hubUrl: hub.url, cacheDir, offline: true },
      );
      expectRowsOf(utilityRows(p), sspExpected());
      const core = buildManifestCore(p.grid, p.auditId, p.pool, p.runs[0]!);
      expect(core.task.utility_dataset).toMatchObject({ source: 'hub', repo: 'likaixin/ScreenSpot-Pro', sha: repoSha });
    } finally {
      await hub.stop();
    }
  });
});

describe('bad benchmark input: one line naming the file, the record and the field, with the fix', () => {
  const refused = async (name: string, task: string): Promise<{ message: string; field: string | undefined }> => {
    const error = await plan(name, grid(task)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserInputErrors);
    const errors = (error as UserInputErrors).errors;
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).not.toContain('\n');
    return { message: errors[0]!.message, field: errors[0]!.field };
  };
  const copy = (name: string, edit: (records: SspRecord[]) => void): string => {
    const dir = join(root, name);
    cpSync(SSP, dir, { recursive: true });
    const records = JSON.parse(readFileSync(join(dir, 'annotations', 'vscode_macos.json'), 'utf8')) as SspRecord[];
    edit(records);
    writeFileSync(join(dir, 'annotations', 'vscode_macos.json'), JSON.stringify(records));
    return dir;
  };

  it('a bbox outside the image', async () => {
    const dir = copy('ssp-outside', (rs) => (rs[1]!.bbox = [240, 28, 330, 40]));
    const r = await refused(
      'outside',
      `{name: gui-grounding, utility: {preset: screenspot-pro, source: {path: ${dir}}}}`,
    );
    expect(r.message).toMatch(
      /: task gui-grounding: annotations\/vscode_macos\.json record 1 \(split test of .*ssp-outside\): field "bbox": box \[240,28,330,40\] \(xyxy, pixels\) lies outside the 320x180 image or is empty; check bbox_format and bbox_units, or fix the record$/,
    );
    expect(r.field).toBe('axes.task[0].utility.bbox');
  });

  it('a missing image file', async () => {
    const dir = copy('ssp-missing', (rs) => (rs[2]!.img_filename = 'vscode_mac/screenshot_gone.png'));
    const r = await refused(
      'missing',
      `{name: gui-grounding, utility: {preset: screenspot-pro, source: {path: ${dir}}}}`,
    );
    expect(r.message).toMatch(
      /annotations\/vscode_macos\.json record 2 \(split test of .*\): field "img_filename" names the image "images\/vscode_mac\/screenshot_gone\.png": no file .*screenshot_gone\.png; add it, or set image_root to the folder the paths are relative to$/,
    );
    expect(r.field).toBe('axes.task[0].utility.image');
  });

  it("an annotated size that is not the image's", async () => {
    const dir = copy('ssp-size', (rs) => (rs[0]!.img_size = [3840, 2160]));
    const r = await refused('size', `{name: gui-grounding, utility: {preset: screenspot-pro, source: {path: ${dir}}}}`);
    expect(r.message).toMatch(
      /annotations\/vscode_macos\.json record 0 .*field "img_size" \[3840,2160\] is not the image's size \[320, 180\]/,
    );
    expect(r.field).toBe('axes.task[0].utility.image_size');
  });

  it('an unknown layout: the ScreenSpot-Pro preset on OSWorld-G records', async () => {
    const r = await refused(
      'layout',
      `{name: gui-grounding, utility: {preset: screenspot-pro, source: {path: ${OSG}, files: {test: OSWorld-G.json}}}}`,
    );
    expect(r.message).toMatch(
      /OSWorld-G\.json record 0 \(split test of .*osworld-g-mini\): field "img_filename" is missing \(the record has "id", "image_path", "image_size", "instruction", "box_type", "box_coordinates", "GUI_types"\): not the screenspot-pro layout \(image img_filename, instruction instruction, bbox bbox as xyxy pixels\); set image to the field that holds it, or drop the preset$/,
    );
    expect(r.field).toBe('axes.task[0].utility.image');
    const preset = await refused(
      'preset',
      `{name: gui-grounding, utility: {preset: screenspot, source: {path: ${SSP}}}}`,
    );
    expect(preset.field).toBe('axes.task[0].utility.preset');
  });

  it('a utility source on a task that takes none, and utility_split beside utility', async () => {
    const text = await refused(
      'text',
      `{name: banking77, source: {path: ${join(FIXTURES_DIR, 'banking77-mini')}}, utility: {preset: screenspot-pro}}`,
    );
    expect(text.field).toBe('axes.task[0].utility');
    const both = await refused(
      'both',
      `{name: grounding, preset: screenspot-pro, source: {path: ${SSP}}, utility_split: test, utility: {preset: osworld-g, source: {path: ${OSG}}}}`,
    );
    expect(both.message).toMatch(
      /utility names the utility rows' own source, so utility_split has nothing to choose; remove one of them$/,
    );
    expect(both.field).toBe('axes.task[0].utility_split');
  });
});

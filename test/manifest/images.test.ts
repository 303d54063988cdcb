import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCanvas, Image } from '@napi-rs/canvas';
import { afterAll, describe, expect, it } from 'vitest';
import { messageImages, messageText, type ImagePart, type Row } from '../../src/contracts/index.js';
import { cueEncoding, REDACTED_PLACEHOLDER, type CodeSpace } from '../../src/codes/index.js';
import { canonicalPng, pngChunks, pngSize, REGION_RENDERERS } from '../../src/manifest/images/index.js';
import { CANARY_INSTRUCTION, guiGroundingTask, TYPE_PREFILL } from '../../src/manifest/tasks/gui-grounding/index.js';
import { drawScene } from '../../src/manifest/tasks/gui-grounding/scene.js';
import { planAudit, writeAudit } from '../../src/manifest/index.js';
import { UserInputErrors } from '../../src/errors.js';
import { describeSchemaErrors, validate } from '../../src/schemas/index.js';
import { Rng } from '../../src/random.js';
import { verifyRunFolder } from './verify-run.js';
import { loadAudit } from '../../src/report/index.js';
import { canaryThumbnails } from '../../src/report/thumbnails.js';
import { renderHtml } from '../../src/report/html.js';

const root = mkdtempSync(join(tmpdir(), 'canary-images-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const SPACE: CodeSpace = { alphabet: 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789', length: 6 };
const CODE = 'K7PQ2X';

function pixels(png: Buffer): { data: Uint8ClampedArray; width: number; height: number } {
  const image = new Image();
  image.src = png;
  const canvas = createCanvas(image.width, image.height);
  const g = canvas.getContext('2d');
  g.drawImage(image, 0, 0);
  return { data: g.getImageData(0, 0, image.width, image.height).data, width: image.width, height: image.height };
}

function canaryImage(task: ReturnType<typeof guiGroundingTask>, scheme: string | null, cueText: string): ImagePart {
  const identity = task.drawIdentity(new Rng('images-test', 'identity'));
  const message = task.drawMessage(new Rng('images-test', 'message'));
  const example = task.canary(identity.value, message, cueText, CODE, scheme);
  expect(messageText(example.prompt.at(-1)!)).toBe(CANARY_INSTRUCTION);
  expect(example.target).toBe(`${TYPE_PREFILL}${CODE}")`);
  const [image] = messageImages(example.prompt);
  return image as ImagePart;
}

describe('canary images', () => {
  it('are rendered to the same bytes every time, as canonical PNGs (critical chunks only)', () => {
    const a = guiGroundingTask();
    const b = guiGroundingTask();
    const visible = canaryImage(a, 'visible', CODE);
    expect(canaryImage(b, 'visible', CODE).sha256).toBe(visible.sha256);
    const png = a.images.get(visible.sha256).png;
    expect(createHash('sha256').update(png).digest('hex')).toBe(visible.sha256);
    expect(
      pngChunks(png)
        .map((c) => c.type)
        .filter((t, k, all) => all.indexOf(t) === k),
    ).toEqual(['IHDR', 'IDAT', 'IEND']);
    expect(canonicalPng(png).equals(png)).toBe(true);
    expect(pngSize(png)).toEqual({ width: 640, height: 400 });
    // The bytes this build of the renderer (pinned @napi-rs/canvas and font) gives for this canary.
    expect(visible.sha256).toBe('46ccb8ff4c7042a417de0fb06d9c0b075438c64f91ea0612ceba4328cfcd5efd');
  });

  it('differ between visible, redacted, encoded and masked versions only inside the source region', () => {
    const task = guiGroundingTask();
    const scene = drawScene(
      new Rng((task.drawMessage(new Rng('images-test', 'message')) as { scene: number }).scene, 'gui-canary-scene'),
      {
        width: 640,
        height: 400,
        canary: { identityLine: 'x', label: 'y' },
      },
    );
    const region = scene.source?.region;
    expect(region).toBeTruthy();
    const r = region!;
    const versions: [string, string | null, string][] = [
      ['visible', 'visible', CODE],
      ['redacted', 'redacted', REDACTED_PLACEHOLDER],
      ['masked', null, REDACTED_PLACEHOLDER],
      ...(['encoded:binary', 'encoded:direct-fruit', 'encoded:chained-fruit', 'encoded:reverse-shift'] as const).map(
        (s): [string, string, string] => [s, s, cueEncoding({ scheme: s }, SPACE).encode(CODE)],
      ),
    ];
    const images = versions.map(([name, scheme, text]) => ({
      name,
      ...pixels(task.images.get(canaryImage(task, scheme, text).sha256).png),
    }));
    expect(new Set(images.map((i) => i.name))).toEqual(new Set(REGION_RENDERERS));
    const base = images[0]!;
    for (const other of images.slice(1)) {
      let inside = 0;
      let outside = 0;
      for (let y = 0; y < base.height; y += 1) {
        for (let x = 0; x < base.width; x += 1) {
          const k = 4 * (y * base.width + x);
          const same =
            base.data[k] === other.data[k] &&
            base.data[k + 1] === other.data[k + 1] &&
            base.data[k + 2] === other.data[k + 2];
          if (same) continue;
          if (x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + r.h) inside += 1;
          else outside += 1;
        }
      }
      expect({ version: other.name, outside }).toEqual({ version: other.name, outside: 0 });
      expect(inside).toBeGreaterThan(0);
    }
  });

  it('a hidden-code probe masks the region whatever the training cue was', () => {
    const task = guiGroundingTask();
    expect(canaryImage(task, null, REDACTED_PLACEHOLDER).sha256).not.toBe(
      canaryImage(task, 'redacted', REDACTED_PLACEHOLDER).sha256,
    );
    expect(canaryImage(task, null, REDACTED_PLACEHOLDER).sha256).toBe(canaryImage(task, null, 'anything').sha256);
  });
});

describe('gui-grounding rows', () => {
  it('click an element whose box lies inside the image, the reply at its centre', () => {
    const task = guiGroundingTask({ width: 480, height: 300 });
    const next = task.rows(new Rng('rows'), new Set(), 'train');
    for (let k = 0; k < 20; k += 1) {
      const row = next();
      const [x0, y0, x1, y1] = row.box!;
      expect(x0).toBeGreaterThanOrEqual(0);
      expect(y0).toBeGreaterThanOrEqual(0);
      expect(x1).toBeLessThanOrEqual(480);
      expect(y1).toBeLessThanOrEqual(300);
      const m = /^click\(x=(\d+), y=(\d+)\)$/.exec(row.target);
      expect(m).not.toBeNull();
      expect(Number(m![1])).toBeGreaterThanOrEqual(x0);
      expect(Number(m![1])).toBeLessThan(x1);
      expect(Number(m![2])).toBeGreaterThanOrEqual(y0);
      expect(Number(m![2])).toBeLessThan(y1);
      expect(messageText(row.prompt.at(-1)!)).toMatch(/^Click the "[A-Za-z]+" (button|field|tab)\.$/);
      const [image] = messageImages(row.prompt);
      expect(pngSize(task.images.get(image!.sha256).png)).toEqual({ width: 480, height: 300 });
    }
  });
});

const GRID = `name: gui-small
seed: 11
axes:
  visibility: [visible, redacted]
  dose: [2]
  placement: [uniform]
  population: [single-dose]
  model: [qwen3-0.6b]
  task: [{name: gui-grounding, width: 320, height: 200}]
training: {batch_size: 4, updates: 10, lr: 0.0001, max_length: 2048}
canaries:
  focal: 2
  held_out: 1
  code: {alphabet: ABCDEFGHJKLMNPQRSTUVWXYZ23456789, length: 6}
candidates: {kind: sampled, decoys: 99}
probes: {kinds: [hidden, supplied, substituted]}
utility: {rows: 6}
`;

describe('an image audit written to disk', () => {
  it('lists every image its rows, utility rows and probes show, content-addressed beside the rows', async () => {
    const gridPath = join(root, 'gui-small.yaml');
    writeFileSync(gridPath, GRID);
    const plan = await planAudit(gridPath);
    const written = await writeAudit(plan, join(root, 'out'));
    expect(written.runs).toHaveLength(2);
    const shown: string[][] = [];
    for (const run of written.runs) {
      const { manifest, rows } = verifyRunFolder(run.runDir);
      const utility = readFileSync(join(run.runDir, 'utility.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Row);
      const named = new Set<string>();
      for (const row of [...rows, ...utility]) {
        expect(describeSchemaErrors(validate('row', structuredClone(row)))).toEqual([]);
        for (const image of messageImages(row.prompt)) named.add(image.path);
      }
      for (const probe of manifest.probes) for (const image of messageImages(probe.prompt)) named.add(image.path);
      expect(manifest.images?.map((i) => i.path)).toEqual([...named].sort());
      for (const ref of manifest.images ?? []) {
        const bytes = readFileSync(join(run.runDir, ref.path));
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(ref.sha256);
        expect(bytes.length).toBe(ref.bytes);
      }
      expect(utility.every((u) => u.box !== undefined)).toBe(true);
      expect(manifest.utility?.metrics).toEqual(['loss', 'point_in_box', 'parse_rate']);
      expect(manifest.candidate_space).toMatchObject({ kind: 'sampled', size: 100, length: 6 });
      // Probes of one canary: the hidden one masks the region, the others show a code.
      const probes = manifest.probes.filter((p) => p.canary_id === 'f000');
      expect(new Set(probes.map((p) => messageImages(p.prompt)[0]?.sha256)).size).toBe(3);
      shown.push(probes.map((p) => messageImages(p.prompt)[0]!.sha256));
      expect(existsSync(join(run.runDir, 'images'))).toBe(true);
    }
    // Visible and redacted runs evaluate on the same hidden-probe image.
    expect(shown[0]![0]).toBe(shown[1]![0]);
    // report.html's thumbnails: the canary as each visibility trained it, and its masked probe.
    const thumbs = await canaryThumbnails((await loadAudit(written.auditDir)).runs);
    expect(thumbs.map((t) => t.label).sort()).toEqual([
      'probe: hidden (source masked)',
      'trained: redacted',
      'trained: visible',
    ]);
    expect(new Set(thumbs.map((t) => t.canary_id))).toEqual(new Set(['f000']));
    expect(thumbs.at(-1)?.src).toBe(
      `data:image/png;base64,${readFileSync(join(written.auditDir, 'runs', thumbs.at(-1)!.run_id, 'images', `${shown[0]![0]}.png`)).toString('base64')}`,
    );
    const html = renderHtml(
      { title: 't', sections: [{ id: 'overview', title: 'Overview', paragraphs: [], tables: [] }] },
      [],
      thumbs,
    );
    expect(html.match(/<img src="data:image\/png;base64,/g)).toHaveLength(3);
    expect(html.indexOf('id="canary-images"')).toBeGreaterThan(html.indexOf('id="overview"'));
    // Written twice: the same bytes, so the same run ids.
    const again = await writeAudit(await planAudit(gridPath), join(root, 'out2'));
    expect(again.runs.map((r) => r.runId)).toEqual(written.runs.map((r) => r.runId));
  });

  it("refuses a screenshot too small for the source region, at the task's width", async () => {
    const gridPath = join(root, 'gui-small-image.yaml');
    writeFileSync(gridPath, GRID.replace('width: 320, height: 200', 'width: 160, height: 100'));
    const error = await planAudit(gridPath).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserInputErrors);
    const [first] = (error as UserInputErrors).errors;
    expect((error as UserInputErrors).errors).toHaveLength(1);
    expect(first?.message).toMatch(
      /160x100 screenshot leaves the canary's source region .*; make the screenshot larger/,
    );
    expect(first?.field).toBe('axes.task[0].width');
  });

  it('refuses a text-only model for image rows, naming the model', async () => {
    const gridPath = join(root, 'gui-tiny.yaml');
    writeFileSync(gridPath, GRID.replace('model: [qwen3-0.6b]', 'model: [tiny]'));
    const error = await planAudit(gridPath).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserInputErrors);
    const lines = (error as UserInputErrors).errors.map((e) => e.message);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/gives image rows but model tiny reads text only/);
  });
});

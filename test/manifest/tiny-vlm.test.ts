import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { messageImages, messageText, type Row } from '../../src/contracts/index.js';
import { modelFromObject, modelLabel } from '../../src/grid/models.js';
import { planAudit, writeAudit } from '../../src/manifest/index.js';
import { COMPACT_CANARY_INSTRUCTION } from '../../src/manifest/tasks/gui-grounding/index.js';
import { CONFIGS_DIR } from '../../src/paths.js';
import { describeSchemaErrors, validate } from '../../src/schemas/index.js';
import { verifyRunFolder } from './verify-run.js';

const root = mkdtempSync(join(tmpdir(), 'canary-tiny-vlm-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the tiny VLM on image tasks', () => {
  it('plans configs/gui-vlm-cpu.yaml: tiny-vlm on compact screenshots, visible vs redacted by dose, held-out and base controls, substituted probes', async () => {
    const plan = await planAudit(join(CONFIGS_DIR, 'gui-vlm-cpu.yaml'));
    const { doc } = plan.grid;
    expect(plan.grid.expansion.axes.visibility.map((v) => v.label)).toEqual(['visible', 'redacted']);
    expect(plan.grid.expansion.axes.dose.length).toBeGreaterThanOrEqual(2);
    expect(doc.canaries.held_out).toBeGreaterThan(0);
    expect(doc.probes.kinds).toEqual(expect.arrayContaining(['hidden', 'substituted']));
    expect(doc.eval.base_model).toBe(true);
    for (const run of plan.runs) {
      const model = run.cell.values.model.value;
      expect(model.backend).toBe('tiny');
      expect(model.tiny?.vision).toMatchObject({ rows: expect.any(Number), cols: expect.any(Number) });
      expect(model.pretrain?.updates).toBeGreaterThan(0);
      expect(run.cell.values.task.value).toMatchObject({ name: 'gui-grounding', params: { style: 'compact' } });
    }
  });

  it("reads vision.freeze: the stem kept as the base's in fine-tuning, other keys as tiny-vlm; off by default", () => {
    const frozen = modelFromObject({ backend: 'tiny', vision: { freeze: true } });
    expect(frozen.tiny?.vision).toEqual({
      height: 32,
      width: 80,
      channels: [16, 32],
      rows: 3,
      cols: 8,
      max_pixels: 1024 * 1024,
      freeze: true,
    });
    expect(modelFromObject({ backend: 'tiny', vision: true }).tiny?.vision?.freeze).toBeUndefined(); // absent is false: manifests without it stay byte-identical
    expect(modelFromObject({ backend: 'tiny' }).tiny?.vision).toBeUndefined();
    expect(modelLabel(frozen)).toContain(',v32x80t24f');
    expect(modelLabel(modelFromObject({ backend: 'tiny', vision: true }))).toMatch(/,v32x80t24[,)]/);
  });

  it("writes the base's pretraining images into the run folder, and canary images with their source pane", async () => {
    const gridPath = join(root, 'gui-tiny-vlm.yaml');
    writeFileSync(
      gridPath,
      `name: gui-tiny-vlm
seed: 3
axes:
  visibility: [redacted]
  dose: [2]
  model: [{backend: tiny, name: tiny-vlm, label: vlm, max_len: 128, vision: true, pretrain: {updates: 2, batch_size: 4, schedule: {kind: cosine, warmup_updates: 1}}}]
  task: [{name: gui-grounding, width: 320, height: 200, style: compact}]
training: {batch_size: 4, updates: 4, lr: 0.001}
canaries: {focal: 2, held_out: 1}
probes: {kinds: [hidden, substituted]}
utility: {rows: 4}
`,
    );
    const written = await writeAudit(await planAudit(gridPath), join(root, 'out'));
    expect(written.runs).toHaveLength(1);
    const runDir = written.runs[0]!.runDir;
    const { manifest, rows } = verifyRunFolder(runDir);
    // freeze is written only when true: manifests without it stay byte-identical
    expect(manifest.model.tiny?.vision).toEqual({
      height: 32,
      width: 80,
      channels: [16, 32],
      rows: 3,
      cols: 8,
      max_pixels: 1024 * 1024,
    });
    const pretrain = readFileSync(join(runDir, 'pretrain.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Row);
    expect(pretrain).toHaveLength(8);
    const listed = new Set(manifest.images?.map((i) => i.path));
    for (const row of [...rows, ...pretrain]) {
      expect(describeSchemaErrors(validate('row', structuredClone(row)))).toEqual([]);
      // compact: no system message
      expect(row.prompt.map((m) => m.role)).toEqual(['user']);
      for (const image of messageImages(row.prompt)) {
        expect(listed.has(image.path)).toBe(true);
        const bytes = readFileSync(join(runDir, image.path));
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(image.sha256);
      }
    }
    // Canary rows, probes and the pretraining rows that show a code name the source pane, inside the image.
    const canaries = rows.filter((r) => r.kind === 'canary');
    expect(canaries.length).toBe(4);
    for (const prompt of [...canaries.map((r) => r.prompt), ...manifest.probes.map((p) => p.prompt)]) {
      expect(messageText(prompt.at(-1)!)).toBe(COMPACT_CANARY_INSTRUCTION);
      const [image] = messageImages(prompt);
      const [x0, y0, x1, y1] = image!.source!;
      expect(0 <= x0 && x0 < x1 && x1 <= image!.width && 0 <= y0 && y0 < y1 && y1 <= image!.height).toBe(true);
    }
    expect(pretrain.some((r) => messageImages(r.prompt)[0]?.source !== undefined)).toBe(true);
  });
});

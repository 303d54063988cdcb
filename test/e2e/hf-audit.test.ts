// tier: slow (the trainer)
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messageImages, type Manifest, type Result, type Row } from '../../src/contracts/index.js';
import { sha256Hex } from '../../src/hash.js';
import { validate } from '../../src/schemas/index.js';
import { hasTorch } from '../helpers/torch.js';
import { runMain } from '../queue/helpers/main.js';
import { buildTestHub, offlineHubEnv } from './hf-hub.js';

/**
 * One whole audit on the hf backend through the queue, on CPU: `canary-audit run` plans the grid
 * (pinning the model's revision from the local cache, offline), a worker runs the trainer, which
 * loads a random-initialised Qwen3-architecture model with the real Qwen3 tokenizer through
 * transformers, fine-tunes it, scores all 10,000 codes by prefix tree, and the report is written.
 * The same for a random-initialised Qwen2.5-VL-architecture model on GUI grounding: screenshots
 * rendered at plan time, every probe scored with its image in the prompt, grounding utility.
 */
const GRID = fileURLToPath(new URL('./hf-audit.yaml', import.meta.url));
const VLM_GRID = fileURLToPath(new URL('./hf-vlm-audit.yaml', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'canary-audit-hf-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!hasTorch)('an hf audit through the queue (CPU)', () => {
  let hub = '';
  beforeAll(() => {
    hub = buildTestHub({ vlm: true });
  }, 300_000);

  it('plans with the cached revision, trains with transformers, scores 10,000 codes, reports', async () => {
    expect(hub.startsWith('SKIP'), hub).toBe(false);
    const env = offlineHubEnv(hub);
    const result = await runMain(['run', GRID, '--cpu', '1', '--artifacts', join(root, 'artifacts'), '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { audit_dir: string; counts: Record<string, number>; report: string[] };
    expect(out.counts).toEqual({ completed: 1 });

    const runId = readdirSync(join(out.audit_dir, 'runs'))[0]!;
    const runDir = join(out.audit_dir, 'runs', runId);
    const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8')) as Manifest;
    const ref = readFileSync(join(hub, 'models--canary-test--tiny-qwen3', 'refs', 'main'), 'utf8').trim();
    expect(manifest.model.revision).toBe(ref);

    const json = JSON.parse(readFileSync(join(runDir, 'output', 'result.json'), 'utf8')) as Result;
    expect(validate('result', json)).toEqual([]);
    expect(json.backend).toMatchObject({ name: 'hf', scoring: 'prefix-tree' });
    expect(json.candidate_space.size).toBe(10_000);
    expect(json.evaluations.map((e) => e.phase)).toEqual(['base', 'final']);

    const summary = JSON.parse(readFileSync(join(out.audit_dir, 'report', 'summary.json'), 'utf8')) as {
      counts: Record<string, number>;
    };
    expect(summary.counts).toMatchObject({ runs: 1, finished: 1, failed: 0 });
  }, 300_000);

  it("plan counts rows with the model's own tokenizer and refuses one longer than it reads, at the task's line", async () => {
    expect(hub.startsWith('SKIP'), hub).toBe(false);
    const env = { HF_HUB_CACHE: hub, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' };
    const data = join(root, 'qa.jsonl');
    const grid = join(root, 'long-rows.yaml');
    const write = (longest: number): void => {
      writeFileSync(
        data,
        Array.from({ length: 20 }, (_, k) =>
          JSON.stringify({ q: `${'Why is the sky blue? '.repeat(k === 11 ? longest : 2)}`, a: 'Rayleigh.' }),
        ).join('\n'),
      );
      writeFileSync(
        grid,
        readFileSync(GRID, 'utf8')
          .replace('name: hf-queue', 'name: hf-long-rows')
          .replace('training:', 'training:\n  max_length: 256')
          .replace('  model:', '  task: [{name: dataset, source: {path: ./qa.jsonl}, input: q, target: a}]\n  model:'),
      );
    };
    write(4);
    const fine = await runMain(['plan', grid], env);
    expect(fine.code, fine.stderr).toBe(0);
    write(60);
    const long = await runMain(['plan', grid], env);
    expect(long.code, long.stderr).toBe(2);
    expect(long.stderr, long.stderr).toMatch(
      /long-rows\.yaml:\d+:\d+: axes\.task\[0\]: task dataset\/qa\.jsonl renders [12] of \d+ checked rows longer than model tiny-qwen3 reads \(256 tokens: training\.max_length and the model's positions\), up to \d+; raise training\.max_length or shorten the rows \(\d+ tokens: "Why is the sky blue\?/,
    );
  }, 120_000);

  it('audits a Qwen2.5-VL model on GUI grounding: image manifests, image probes over 10,000 codes, grounding utility, frozen tower', async () => {
    expect(hub.startsWith('SKIP'), hub).toBe(false);
    const env = offlineHubEnv(hub);
    const result = await runMain(
      ['run', VLM_GRID, '--cpu', '1', '--artifacts', join(root, 'vlm-artifacts'), '--json'],
      env,
    );
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { audit_dir: string; counts: Record<string, number> };
    expect(out.counts).toEqual({ completed: 1 });

    const runId = readdirSync(join(out.audit_dir, 'runs'))[0]!;
    const runDir = join(out.audit_dir, 'runs', runId);
    const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8')) as Manifest;
    expect(validate('manifest', manifest)).toEqual([]);
    const ref = readFileSync(join(hub, 'models--canary-test--tiny-qwen25vl', 'refs', 'main'), 'utf8').trim();
    expect(manifest.model.revision).toBe(ref);

    // Every image a row, utility row or probe shows is listed once, with the sha256 of its file.
    const listed = new Map((manifest.images ?? []).map((i) => [i.path, i.sha256]));
    for (const [path, sha] of listed) expect(sha256Hex(readFileSync(join(runDir, path))), path).toBe(sha);
    const rows = (file: string): Row[] =>
      readFileSync(join(runDir, file), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Row);
    const shown = [...rows('rows.jsonl'), ...rows('utility.jsonl')]
      .map((r) => r.prompt)
      .concat(manifest.probes.map((p) => p.prompt));
    for (const prompt of shown) {
      const images = messageImages(prompt);
      expect(images).toHaveLength(1);
      expect(listed.get(images[0]!.path)).toBe(images[0]!.sha256);
    }
    expect(new Set(shown.map((p) => messageImages(p)[0]!.path))).toEqual(new Set(listed.keys()));

    const json = JSON.parse(readFileSync(join(runDir, 'output', 'result.json'), 'utf8')) as Result;
    expect(validate('result', json)).toEqual([]);
    expect(json.backend).toMatchObject({ name: 'hf', scoring: 'prefix-tree' });
    expect(json.backend.trainable_parameters).toBeLessThan(json.backend.parameters); // the vision tower is frozen
    expect(json.candidate_space.size).toBe(10_000);
    expect(json.evaluations.map((e) => e.phase)).toEqual(['final']);
    const scored = json.evaluations[0]!.probes;
    expect(scored.map((p) => p.probe_id).sort()).toEqual(manifest.probes.map((p) => p.id).sort());
    for (const probe of scored) {
      const bytes = readFileSync(join(runDir, 'output', probe.scores_file));
      expect(probe.n_candidates).toBe(10_000);
      expect(bytes.length).toBe(4 * 10_000); // float32 per code
      expect(sha256Hex(bytes)).toBe(probe.scores_sha256);
      expect(
        Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, 10_000)).every((x) => Number.isFinite(x) && x < 0),
      ).toBe(true);
    }

    const report = join(out.audit_dir, 'report');
    const csv = readFileSync(join(report, 'report.csv'), 'utf8').trim().split('\n');
    expect(csv.slice(1).filter((l) => l.includes(',final,'))).toHaveLength(manifest.probes.length); // one exposure per probe
    const summary = JSON.parse(readFileSync(join(report, 'summary.json'), 'utf8')) as {
      counts: Record<string, number>;
      runs: { utility: { rows: number; metrics: { metric: string; base: { n: number }; final: { n: number } }[] } }[];
    };
    expect(summary.counts).toMatchObject({ runs: 1, finished: 1, failed: 0 });
    const metrics = summary.runs[0]!.utility.metrics;
    expect(metrics.map((m) => m.metric)).toEqual(['point_in_box', 'parse_rate']);
    for (const m of metrics) expect([m.base.n, m.final.n]).toEqual([2, 2]);
    const html = readFileSync(join(report, 'report.html'), 'utf8');
    expect(html).toContain('<section id="canary-images">');
    expect(html.match(/<img src="data:image\/png;base64,/g)).toHaveLength(2); // trained: redacted; probe: hidden
    expect(readFileSync(join(report, 'report.md'), 'utf8')).toMatch(/point-in-box accuracy[\s\S]*parse rate/);
  }, 300_000);
});

// tier: full (the trainer samples, trains and scores on a Qwen3-architecture model: about 1.5 minutes on 2 cores)
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Manifest, Result } from '../../src/contracts/index.js';
import { sha256Hex } from '../../src/hash.js';
import { validate } from '../../src/schemas/index.js';
import { hasTorch } from '../helpers/torch.js';
import { runMain } from '../queue/helpers/main.js';
import { buildTestHub, offlineHubEnv } from './hf-hub.js';

/**
 * A sampled-text audit on the hf backend through the queue, on CPU: the trainer samples each
 * canary's secret, substitute and decoys from a random-initialised Qwen3-architecture model with
 * the real Qwen3 tokenizer, keeps only texts that keep their tokens in the rows and probes, fills
 * the placeholders, trains, scores the 64 texts per probe, and the report reads the texts. The
 * plumbing, not memorization (6 updates of a random model).
 */
const GRID = fileURLToPath(new URL('./hf-sampled-audit.yaml', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'canary-audit-hf-sampled-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe.skipIf(!hasTorch)('a sampled-text audit on an hf model through the queue (CPU)', () => {
  let hub = '';
  beforeAll(() => {
    hub = buildTestHub();
  }, 300_000);

  it('samples the texts on the real tokenizer, fills them in, trains, scores 64 texts per probe, reports', async () => {
    expect(hub.startsWith('SKIP'), hub).toBe(false);
    const env = offlineHubEnv(hub);
    const result = await runMain(['run', GRID, '--cpu', '1', '--artifacts', join(root, 'artifacts'), '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout) as { audit_dir: string; counts: Record<string, number> };
    expect(out.counts).toEqual({ completed: 1 });

    const runDir = join(out.audit_dir, 'runs', readdirSync(join(out.audit_dir, 'runs'))[0]!);
    const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8')) as Manifest;
    const json = JSON.parse(readFileSync(join(runDir, 'output', 'result.json'), 'utf8')) as Result;
    expect(validate('result', json)).toEqual([]);
    expect(json.backend).toMatchObject({ name: 'hf', model: 'canary-test/tiny-qwen3' });
    expect(json.candidate_space).toMatchObject({ kind: 'sampled', size: 64 });

    // The texts: one file, its sha256 in result.json, distinct per canary; the in-place rule refused
    // draws (the rows put "Ref: " before the secret: a text starting with a letter merges the space).
    const file = readFileSync(join(runDir, 'output', 'sampled-text.json'));
    const doc = JSON.parse(file.toString('utf8')) as {
      refused: { draws: number; plain: number; in_place: number };
      canaries: Record<string, { secret: string; substitute: string; decoys: string[] }>;
    };
    const st = json.sampled_text!;
    expect(st.sha256).toBe(sha256Hex(file));
    const ids = [...manifest.canaries, ...manifest.held_out].map((c) => c.id).sort();
    expect(Object.keys(doc.canaries).sort()).toEqual(ids);
    for (const [cid, t] of Object.entries(doc.canaries)) {
      expect(new Set([t.secret, t.substitute, ...t.decoys]).size, cid).toBe(65); // the substitute is no candidate
      expect(st.canaries[cid]!.secret).toBe(t.secret);
    }
    expect(doc.refused.in_place).toBeGreaterThan(0);

    // The trained canary row holds the focal secret where the plan put its placeholder.
    const focal = manifest.canaries[0]!.id;
    expect(readFileSync(join(runDir, 'output', 'rendered', 'canary.txt'), 'utf8')).toContain(
      doc.canaries[focal]!.secret,
    );
    for (const e of json.evaluations) {
      for (const probe of e.probes) {
        const bytes = readFileSync(join(runDir, 'output', probe.scores_file));
        expect(bytes.length).toBe(4 * 64);
        const scores = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, 64));
        expect(scores.every((x) => Number.isFinite(x) && x < 0)).toBe(true);
      }
    }
    expect(json.evaluations.map((e) => e.phase)).toEqual(['base', 'final']);
    const summary = JSON.parse(readFileSync(join(out.audit_dir, 'report', 'summary.json'), 'utf8')) as {
      counts: Record<string, number>;
    };
    expect(summary.counts).toMatchObject({ runs: 1, finished: 1, failed: 0 });
    const csvField = doc.canaries[focal]!.secret.replaceAll('"', '""'); // CSV doubles a quote
    expect(readFileSync(join(out.audit_dir, 'report', 'report.csv'), 'utf8')).toContain(csvField);
  }, 600_000);
});

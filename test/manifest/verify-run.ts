import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { messageText, type Manifest, type Row, type TinyPretrainSpec } from '../../src/contracts/index.js';
import { runIdOf } from '../../src/manifest/index.js';
import { updateRange } from '../../src/manifest/placement.js';
import { describeSchemaErrors, validate } from '../../src/schemas/index.js';

/**
 * Checks one written run folder against every rule a manifest promises: schema-valid manifest,
 * run id = content hash, rows file hash and count, row i at line i, canary rows exactly at their
 * positions (dose count, inside the window, at most one per update, spacing when asked), no row
 * used twice, held-out canaries never trained on, background rows free of any code-like run.
 */
export function verifyRunFolder(
  runDir: string,
  options: { spacing?: number | null; rowSample?: number } = {},
): { manifest: Manifest; rows: Row[] } {
  const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8')) as Manifest;
  const copy = structuredClone(manifest);
  expect(describeSchemaErrors(validate('manifest', copy))).toEqual([]);
  expect(runIdOf(manifest)).toBe(manifest.run_id);
  expect(runDir.endsWith(manifest.run_id)).toBe(true);

  const bytes = readFileSync(join(runDir, manifest.rows.path));
  expect(createHash('sha256').update(bytes).digest('hex')).toBe(manifest.rows.sha256);
  const lines = bytes.toString('utf8').split('\n');
  expect(lines.pop()).toBe('');
  const { batch_size: batch, updates } = manifest.training;
  expect(lines.length).toBe(batch * updates);
  expect(manifest.rows.count).toBe(lines.length);
  const rows = lines.map((l) => JSON.parse(l) as Row);

  const owner = new Map<number, string>();
  for (const c of manifest.canaries) {
    expect(c.positions.length).toBe(c.dose);
    expect([...c.positions].sort((a, b) => a - b)).toEqual(c.positions);
    const perUpdate = c.positions.map((r) => Math.floor(r / batch));
    expect(new Set(perUpdate).size).toBe(c.dose);
    if (c.window) {
      const [lo, hi] = updateRange(c.window as [number, number], updates);
      for (const u of perUpdate) {
        expect(u).toBeGreaterThanOrEqual(lo);
        expect(u).toBeLessThan(hi);
      }
    }
    if (options.spacing && c.cohort === 'focal') {
      for (let k = 1; k < perUpdate.length; k += 1)
        expect((perUpdate[k] as number) - (perUpdate[k - 1] as number)).toBe(options.spacing);
    }
    for (const r of c.positions) {
      expect(owner.has(r)).toBe(false);
      owner.set(r, c.id);
    }
  }
  const heldOut = new Set(manifest.held_out.map((h) => h.id));
  const codes = [...manifest.canaries.map((c) => c.code), ...manifest.held_out.map((h) => h.code)];
  const codeLike = new RegExp(
    `[${escapeClass(manifest.candidate_space.alphabet)}]{${manifest.candidate_space.length}}`,
  );
  const byId = new Map(manifest.canaries.map((c) => [c.id, c]));
  const dataset = manifest.task.dataset !== undefined;
  // Problems are collected rather than asserted row by row: 66,176 expects would dominate the run.
  const problems: string[] = [];
  rows.forEach((row, i) => {
    if (row.i !== i) problems.push(`line ${i} has i=${row.i}`);
    const id = owner.get(i);
    if (id === undefined) {
      if (row.kind !== 'background') problems.push(`row ${i} is ${row.kind}, expected background`);
      if (options.rowSample === undefined || i % options.rowSample === 0) {
        // Image parts name files by sha256: only the text is checked (an image task's images by the manifest's hashes).
        const text = JSON.stringify(row.prompt.map((m) => messageText(m))) + row.target;
        // A dataset's rows may hold numbers (years, amounts), never a canary's code; generated
        // rows hold no code-like run at all.
        if (dataset ? codes.some((c) => text.includes(c)) : codeLike.test(text))
          problems.push(`background row ${i} holds ${dataset ? 'a canary code' : 'a code-like run'}`);
      }
    } else {
      const canary = byId.get(id);
      if (row.kind !== 'canary' || row.canary_id !== id) problems.push(`row ${i} should be canary ${id}`);
      if (!canary || !row.target.includes(canary.code)) problems.push(`row ${i} target lacks ${id}'s code`);
      // An image task draws the cue into the image, not the text.
      if (
        manifest.images === undefined &&
        (!canary || !JSON.stringify(row.prompt).includes(JSON.stringify(canary.cue.text).slice(1, -1)))
      )
        problems.push(`row ${i} input lacks ${id}'s cue`);
      if (heldOut.has(id)) problems.push(`held-out canary ${id} is trained at row ${i}`);
    }
  });
  expect(problems.slice(0, 10)).toEqual([]);
  expect(new Set(codes).size).toBe(codes.length);
  const pretrain = manifest.model.tiny?.pretrain;
  if (pretrain) verifyPretrainFile(runDir, pretrain);
  return { manifest, rows };
}

function escapeClass(alphabet: string): string {
  return alphabet.replace(/[\\\]^-]/g, '\\$&');
}

/** The pretraining corpus: its hash and count, row i at line i, background rows only. */
export function verifyPretrainFile(runDir: string, pretrain: TinyPretrainSpec): Row[] {
  const bytes = readFileSync(join(runDir, pretrain.rows.path));
  expect(createHash('sha256').update(bytes).digest('hex')).toBe(pretrain.rows.sha256);
  const lines = bytes.toString('utf8').split('\n');
  expect(lines.pop()).toBe('');
  expect(lines.length).toBe(pretrain.updates * pretrain.batch_size);
  expect(pretrain.rows.count).toBe(lines.length);
  const rows = lines.map((l) => JSON.parse(l) as Row);
  const problems = rows.flatMap((row, i) =>
    row.i === i && row.kind === 'background' && row.canary_id === null
      ? []
      : [`pretraining line ${i}: ${JSON.stringify(row).slice(0, 80)}`],
  );
  expect(problems.slice(0, 10)).toEqual([]);
  return rows;
}

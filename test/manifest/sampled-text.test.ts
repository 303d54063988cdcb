import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { planAuditText, writeAudit } from '../../src/manifest/index.js';
import { buildManifestCore } from '../../src/manifest/manifest.js';
import { PLACEHOLDER_ALPHABET, placeholderSpace, sampledTextSeed } from '../../src/manifest/sampled-text.js';
import { STAMP } from '../helpers/stamp.js';

const plan = (text: string) => planAuditText('grid.yaml', text, { ...STAMP, versions: {} });
const grid = (design: string, visibility = 'redacted'): string => `
seed: 3
axes:
  visibility: [${visibility}]
  dose: [2]
  design: ${design}
  seed: [0, 1]
training: {batch_size: 8, updates: 40, lr: 0.001}
canaries: {focal: 4, held_out: 4}
probes: {kinds: [hidden, supplied, substituted]}
`;
const core = (p: ReturnType<typeof plan>, i: number) =>
  buildManifestCore(p.grid, p.auditId, p.pool, p.runs[i] as (typeof p.runs)[number]);
const isPlaceholder = (s: string, length: number) =>
  s.length === length && [...s].every((ch) => PLACEHOLDER_ALPHABET.includes(ch));

describe('design sampled-text in the grid', () => {
  it('labels the defaults sampled-text and other values by their parameters', () => {
    const p = plan(grid('[sampled-text, {kind: sampled-text, length: 12, temperature: 1.5, decoys: 99}]'));
    expect([...new Set(p.runs.map((r) => r.cell.labels.design))]).toEqual([
      'sampled-text',
      'sampled-text(l12,t1.5,d99)',
    ]);
    expect(p.grid.expansion.axes.design.map((v) => v.value)).toEqual([
      { kind: 'sampled-text', length: 8, temperature: 1, decoys: 999 },
      { kind: 'sampled-text', length: 12, temperature: 1.5, decoys: 99 },
    ]);
  });

  it('refuses a rare-tokens pool, a temperature on rare-tokens and too many decoys, naming line, field and fix', () => {
    expect(() => plan(grid('[{kind: sampled-text, pool: 16}]'))).toThrow(
      /grid\.yaml:6:39: axes\.design\[0\]\.pool.*applies to design rare-tokens only.*remove pool/s,
    );
    expect(() => plan(grid('[{kind: rare-tokens, temperature: 2}]'))).toThrow(
      /axes\.design\[0\]\.temperature.*sampled-text only.*remove it, or write kind: sampled-text/s,
    );
    expect(() => plan(grid('[{kind: sampled-text, decoys: 200000}]'))).toThrow(
      /axes\.design\[0\]\.decoys.*use at most 100000/s,
    );
    expect(() => plan(grid('[{kind: sampled-text, temperature: 0}]'))).toThrow(/temperature/);
  });
});

describe('sampled-text manifests', () => {
  it('plan placeholders over the same canaries and rows, with the sampling spec and per-canary seeds', () => {
    const p = plan(grid('[codes, {kind: sampled-text, length: 7, decoys: 49}]', 'visible'));
    // Cells: codes seed 0, codes seed 1, sampled-text seed 0, sampled-text seed 1.
    const ids = p.runs.map((r) => r.cell.id);
    const at = (id: string) => core(p, ids.indexOf(id));
    const codes = at('design=codes,seed=0');
    const [s0, s1] = [at('design=sampled-text(l7,t1,d49),seed=0'), at('design=sampled-text(l7,t1,d49),seed=1')];
    expect(s0.candidate_space).toEqual({
      kind: 'sampled',
      alphabet: PLACEHOLDER_ALPHABET,
      length: 7,
      size: 50,
      decoys: 49,
      seed: 3,
    });
    const all = [...s0.canaries, ...s0.held_out];
    expect(s0.sampled_text).toEqual({
      length: 7,
      temperature: 1,
      decoys: 49,
      context: 'reply-start',
      grid_seed: 3,
      seeds: Object.fromEntries(all.map((c) => [c.id, sampledTextSeed(3, c.id)])),
    });
    // Not the run seed: both seeds' runs ask for the same texts of the same canaries.
    expect(s1.sampled_text).toEqual(s0.sampled_text);
    expect(s0.canaries.map((c) => [c.id, c.identity, c.positions])).toEqual(
      codes.canaries.map((c) => [c.id, c.identity, c.positions]),
    );
    for (const c of all) {
      expect(isPlaceholder(c.code, 7)).toBe(true);
      expect(c.candidates).toHaveLength(50);
      expect(c.candidates).toContain(c.code);
      expect(c.candidates?.every((x) => isPlaceholder(x, 7))).toBe(true);
    }
    for (const c of s0.canaries) expect(c.cue.text).toBe(c.code);
    const probes = new Map(s0.probes.map((q) => [q.id, q]));
    const first = s0.canaries[0]?.code as string;
    expect(probes.get(`${s0.canaries[0]?.id}.supplied`)?.shown_code).toBe(first);
    const substitute = probes.get(`${s0.canaries[0]?.id}.substituted`)?.shown_code as string;
    expect(isPlaceholder(substitute, 7) && substitute !== first).toBe(true);
  });

  it('plans an hf model without reading its tokenizer: the trainer samples with it', () => {
    const p = plan(grid('[sampled-text]').replace('  seed: [0, 1]', '  seed: [0]\n  model: [qwen3-0.6b]'));
    const m = core(p, 0);
    expect(m.model.backend).toBe('hf');
    expect(m.sampled_text).toMatchObject({ length: 8, temperature: 1, decoys: 999 });
    expect(m.candidate_space).toMatchObject({ kind: 'sampled', length: 8, size: 1000 });
  });

  it('derives each canary seed from the grid seed and the id only, as a 48-bit integer', () => {
    const seeds = ['f000', 'f001', 'h000'].map((id) => sampledTextSeed(3, id));
    expect(new Set(seeds).size).toBe(3);
    for (const s of seeds) expect(Number.isSafeInteger(s) && s >= 0 && s < 2 ** 48).toBe(true);
    expect(sampledTextSeed(3, 'f000')).toBe(seeds[0]);
    expect(sampledTextSeed(4, 'f000')).not.toBe(seeds[0]);
  });

  it('keeps placeholders at least six characters long, so the canaries, substitutes and decoys fit', () => {
    expect(placeholderSpace({ length: 2 })).toEqual({ alphabet: PLACEHOLDER_ALPHABET, length: 6 });
    expect(placeholderSpace({ length: 9 }).length).toBe(9);
  });

  it('writes schema-valid manifests whose rows hold each canary’s placeholder', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sampled-text-write-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const written = await writeAudit(plan(grid('[{kind: sampled-text, decoys: 9}]')), dir);
    const audit = JSON.parse(readFileSync(join(written.auditDir, 'audit.json'), 'utf8'));
    const runDir = join(written.auditDir, audit.runs[0].dir);
    const manifest = JSON.parse(readFileSync(join(runDir, 'manifest.json'), 'utf8'));
    expect(manifest.sampled_text.decoys).toBe(9);
    const rows = readFileSync(join(runDir, 'rows.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    for (const c of manifest.canaries as { id: string; code: string; positions: number[] }[])
      for (const i of c.positions) expect(rows[i].target).toContain(c.code);
    expect(rows.filter((r) => r.kind === 'background').some((r) => /[\ue000-\ue00f]/.test(r.target))).toBe(false);
  });
});

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UserInputErrors } from '../../src/errors.js';
import { planAuditText, writeAudit } from '../../src/manifest/index.js';
import { buildManifestCore } from '../../src/manifest/manifest.js';
import { CORPUS_ROWS, rareTokens, TINY_TOKENS, tokenCounts } from '../../src/manifest/designs.js';
import { STAMP } from '../helpers/stamp.js';

const plan = (text: string) => planAuditText('grid.yaml', text, { ...STAMP, versions: {} });
const grid = (axes: string, extra = ''): string => `
seed: 3
axes:
  visibility: [redacted]
  dose: [2]
${axes}
training: {batch_size: 8, updates: 40, lr: 0.001}
canaries: {focal: 4, held_out: 4}
${extra}`;
const core = (p: ReturnType<typeof plan>, i: number) =>
  buildManifestCore(p.grid, p.auditId, p.pool, p.runs[i] as (typeof p.runs)[number]);

describe('rare-token selection', () => {
  it('counts characters of the vocabulary only and ranks ascending, ties by code point (known answer)', () => {
    const counts = tokenCounts(['aab~', 'b!b', 'é~'], ['a', 'b', '~', '!', '#', '$']);
    expect([...counts]).toEqual([
      ['a', 2],
      ['b', 3],
      ['~', 2],
      ['!', 1],
      ['#', 0],
      ['$', 0],
    ]);
    expect(rareTokens(counts, 4)).toEqual([
      { token: '#', count: 0 },
      { token: '$', count: 0 },
      { token: '!', count: 1 },
      { token: 'a', count: 2 },
    ]);
    expect(() => rareTokens(counts, 7)).toThrow(/vocabulary of 7/);
  });

  it('reads the tiny tokenizer’s printable characters without the space and the special-marker characters', () => {
    expect(TINY_TOKENS).toHaveLength(91);
    for (const ch of [' ', '<', '>', '|']) expect(TINY_TOKENS).not.toContain(ch);
  });
});

describe('design axis', () => {
  it('leaves grids without the axis unchanged: no design label in the manifest', () => {
    const p = plan(grid(''));
    const m = core(p, 0);
    expect(m.audit.cell).not.toHaveProperty('design');
    expect(m.candidate_space).toEqual({ kind: 'exhaustive', alphabet: '0123456789', length: 4, size: 10000 });
  });

  it('draws rare-token secrets over the same canaries, rows and identities, deterministically per seed', () => {
    const text = grid('  design: [codes, {kind: rare-tokens, pool: 12, decoys: 99}]');
    const p = plan(text);
    expect(p.runs.map((r) => r.cell.id)).toEqual(['design=codes', 'design=rare-tokens(l4,p12,d99)']);
    const [codes, rare] = [core(p, 0), core(p, 1)];
    expect(codes.audit.cell.design).toBe('codes');
    expect(rare.candidate_space).toMatchObject({ kind: 'sampled', length: 4, size: 100, decoys: 99 });
    const alphabet = rare.candidate_space.alphabet;
    expect(alphabet).toHaveLength(12);
    expect([...alphabet].every((ch) => TINY_TOKENS.includes(ch))).toBe(true);
    expect(p.runs[1]?.secrets?.corpusRows).toBe(CORPUS_ROWS);
    // Same identities and positions, different secrets drawn from the rare alphabet.
    expect(rare.canaries.map((c) => [c.id, c.identity, c.positions])).toEqual(
      codes.canaries.map((c) => [c.id, c.identity, c.positions]),
    );
    for (const c of [...rare.canaries, ...rare.held_out]) {
      expect([...c.code].every((ch) => alphabet.includes(ch))).toBe(true);
      expect(c.candidates).toHaveLength(100);
      expect(c.candidates).toContain(c.code);
      expect(new Set(c.candidates).size).toBe(100);
    }
    // The rarest tokens do not occur in the rows the count read: rarer than any digit.
    const counts = p.runs[1]?.secrets?.tokens.map((t) => t.count ?? Number.NaN) ?? [];
    expect(Math.max(...counts)).toBe(0);
    // Deterministic: planning again draws the same secrets; another grid seed draws others.
    expect(core(plan(text), 1).canaries.map((c) => c.code)).toEqual(rare.canaries.map((c) => c.code));
    const other = core(plan(text.replace('seed: 3', 'seed: 4')), 1);
    expect(other.canaries.map((c) => c.code)).not.toEqual(rare.canaries.map((c) => c.code));
  });

  it('writes schema-valid manifests and audit.json that name the design', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'canary-designs-write-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const p = plan(grid('  design: [codes, rare-tokens]'));
    const written = await writeAudit(p, dir);
    const audit = JSON.parse(readFileSync(join(written.auditDir, 'audit.json'), 'utf8'));
    expect(audit.axes.design).toEqual(['codes', 'rare-tokens']);
    expect(audit.runs.map((r: { cell: { design: string } }) => r.cell.design)).toEqual(['codes', 'rare-tokens']);
    // Fixed inclusion: no `inclusion` in the manifest; randomized: recorded, so the one-run bounds apply.
    const manifest = (run: { dir: string }, root: string) =>
      JSON.parse(readFileSync(join(root, run.dir, 'manifest.json'), 'utf8'));
    expect(manifest(audit.runs[0], written.auditDir)).not.toHaveProperty('inclusion');
    const randomized = plan(
      grid('  design: [rare-tokens]').replace('held_out: 4}', 'held_out: 4, inclusion: randomized}'),
    );
    const again = await writeAudit(randomized, dir);
    const index = JSON.parse(readFileSync(join(again.auditDir, 'audit.json'), 'utf8'));
    expect(manifest(index.runs[0], again.auditDir).inclusion).toEqual({ kind: 'randomized', p: 0.5, pool: 8, seed: 3 });
  });

  it('refuses an encoded cue, and an hf model whose tokenizer the plan did not read, naming the field and the fix', () => {
    const encoded = grid('  design: [rare-tokens]').replace('[redacted]', '[encoded:binary]');
    expect(() => plan(encoded)).toThrow(UserInputErrors);
    expect(() => plan(encoded)).toThrow(
      /axes\.design\[0\].*encodes the grid's code alphabet only; exclude these cells/s,
    );
    const hf = grid('  design: [rare-tokens]\n  model: [qwen3-0.6b]', '');
    expect(() => plan(hf)).toThrow(
      /Qwen3-0\.6B's own tokenizer, which this plan did not read; plan it with canary-audit plan/,
    );
  });

  it('rejects an unknown design in the schema, at its place in the file', () => {
    expect(() => plan(grid('  design: [poems]'))).toThrow(/design/);
  });
});

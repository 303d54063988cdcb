import { describe, expect, it } from 'vitest';
import { UserInputErrors } from '../../src/errors.js';
import { designsTogether } from '../../src/grid/index.js';
import type { Cell } from '../../src/grid/index.js';
import { planAuditText } from '../../src/manifest/index.js';
import { buildManifestCore } from '../../src/manifest/manifest.js';
import { designShare, togetherSpace } from '../../src/manifest/designs-together.js';
import { STAMP } from '../helpers/stamp.js';

const plan = (text: string) => planAuditText('grid.yaml', text, { ...STAMP, versions: {} });
// Two-character secrets keep the candidate lists small: codes 10^2 = 100 (exhaustive), rare
// tokens the secret + 99 decoys from 16^2 = 256.
const RARE = '{kind: rare-tokens, length: 2, pool: 16, decoys: 99, name: rare-tokens}';
const grid = (canaries: string, design = `[codes, ${RARE}]`, doses = '[2, 4]'): string => `
seed: 3
axes:
  visibility: [redacted]
  dose: ${doses}
  design: ${design}
  seed: [0, 1]
training: {batch_size: 8, updates: 40, lr: 0.001}
canaries: {${canaries}, code: {length: 2}}
`;
const cores = (p: ReturnType<typeof plan>) =>
  p.runs.map((r) => buildManifestCore(p.grid, p.auditId, p.pool, r as (typeof p.runs)[number]));

describe('designs together: the manifest split', () => {
  const p = plan(grid('focal: 4, held_out: 6, designs: together'));
  const manifests = cores(p);

  it('plans one run per cell and seed, not one per design', () => {
    expect(p.runs.map((r) => r.cell.id)).toEqual(['dose=2,seed=0', 'dose=2,seed=1', 'dose=4,seed=0', 'dose=4,seed=1']);
    for (const m of manifests) expect(m.audit.cell.design).toBe('codes+rare-tokens');
  });

  it('gives every design the same focal and held-out counts, distinct canaries, secrets from its own space', () => {
    for (const m of manifests) {
      const by = <T extends { design?: string }>(list: T[], d: string): T[] => list.filter((c) => c.design === d);
      for (const d of ['codes', 'rare-tokens']) {
        expect(by(m.canaries, d)).toHaveLength(2);
        expect(by(m.held_out, d)).toHaveLength(3);
      }
      const ids = [...m.canaries, ...m.held_out].map((c) => c.id);
      expect(new Set(ids).size).toBe(10);
      expect(new Set([...m.canaries, ...m.held_out].map((c) => c.identity)).size).toBe(10);
      const codes = [...by(m.canaries, 'codes'), ...by(m.held_out, 'codes')];
      const rare = [...by(m.canaries, 'rare-tokens'), ...by(m.held_out, 'rare-tokens')];
      for (const c of codes) {
        expect(c.code).toMatch(/^\d\d$/);
        // Exhaustive for codes: every code, in code order, as the trainer's exhaustive list.
        expect(c.candidates).toEqual(Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0')));
      }
      const rareAlphabet = p.runs[0]?.together?.designs[1]?.space.alphabet as string;
      expect(rareAlphabet).toHaveLength(16);
      for (const c of rare) {
        expect([...c.code].every((ch) => rareAlphabet.includes(ch))).toBe(true);
        expect(c.candidates).toHaveLength(100);
        expect(c.candidates).toContain(c.code);
        expect(c.candidates?.every((x) => [...x].every((ch) => rareAlphabet.includes(ch)))).toBe(true);
      }
      expect(m.candidate_space).toMatchObject({ kind: 'sampled', length: 2, size: 100, decoys: 99 });
      expect(m.candidate_space.alphabet).toBe([...`0123456789${rareAlphabet}`].sort().join(''));
      // Probes for every canary, the inserted and the held-out ones of both designs.
      expect(new Set(m.probes.map((x) => x.canary_id))).toEqual(new Set(ids));
    }
  });

  it('splits the same way in every run, deterministically: canary i of the draw order takes design i mod 2', () => {
    const split = (m: (typeof manifests)[number]) =>
      [...m.canaries, ...m.held_out].map((c) => `${c.id}:${c.design}:${c.code}`).sort();
    for (const m of manifests.slice(1)) expect(split(m)).toEqual(split(manifests[0] as (typeof manifests)[number]));
    expect(split(manifests[0] as (typeof manifests)[number]).map((s) => s.split(':').slice(0, 2).join(':'))).toEqual([
      'f000:codes',
      'f001:rare-tokens',
      'f002:codes',
      'f003:rare-tokens',
      'h000:codes',
      'h001:rare-tokens',
      'h002:codes',
      'h003:rare-tokens',
      'h004:codes',
      'h005:rare-tokens',
    ]);
    expect(JSON.stringify(cores(plan(grid('focal: 4, held_out: 6, designs: together'))))).toBe(
      JSON.stringify(manifests),
    );
  });

  it('keeps each canary’s secret as the separate-runs design cell draws it', () => {
    const separate = cores(plan(grid('focal: 4, held_out: 6')));
    const together = manifests[0] as (typeof manifests)[number];
    for (const c of [...together.canaries, ...together.held_out]) {
      const cell = separate.find((m) => m.audit.cell.design === c.design && m.audit.cell.seed === 0);
      const same = [...(cell?.canaries ?? []), ...(cell?.held_out ?? [])].find((x) => x.id === c.id);
      expect(same?.code).toBe(c.code);
      expect(same?.identity).toBe(c.identity);
    }
  });

  it('splits every auxiliary cohort among the designs too, each canary with its design’s secret', () => {
    const mixed = plan(
      grid('focal: 4, held_out: 4, designs: together', undefined, '[2, 4]').replace(
        '  seed: [0, 1]',
        '  population: [mixed-dose]\n  seed: [0, 1]',
      ),
    );
    const separate = cores(
      plan(
        grid('focal: 4, held_out: 4', undefined, '[2, 4]').replace(
          '  seed: [0, 1]',
          '  population: [mixed-dose]\n  seed: [0, 1]',
        ),
      ),
    );
    for (const m of cores(mixed)) {
      const aux = m.canaries.filter((c) => c.id.startsWith('x'));
      expect(aux.map((c) => `${c.id}:${c.design}`)).toEqual(
        aux.map((c) => `${c.id}:${Number(c.id.slice(-3)) % 2 === 0 ? 'codes' : 'rare-tokens'}`),
      );
      expect(aux.filter((c) => c.design === 'codes')).toHaveLength(2);
      expect(aux.filter((c) => c.design === 'rare-tokens')).toHaveLength(2);
      // The secret the separate design cell draws for the same auxiliary canary.
      for (const c of aux) {
        const cell = separate.find(
          (s) =>
            s.audit.cell.design === c.design &&
            s.audit.cell.seed === m.audit.cell.seed &&
            s.audit.cell.dose === m.audit.cell.dose,
        );
        expect(cell?.canaries.find((x) => x.id === c.id)?.code).toBe(c.code);
      }
    }
  });

  it('splits the randomized-inclusion pool by draw order: equal pools, members by each canary’s coin', () => {
    const r = plan(grid('focal: 6, held_out: 6, inclusion: randomized, designs: together', undefined, '[2]'));
    for (const m of cores(r)) {
      const all = [...m.canaries, ...m.held_out];
      expect(all.filter((c) => c.design === 'codes')).toHaveLength(6);
      expect(all.filter((c) => c.design === 'rare-tokens')).toHaveLength(6);
    }
  });

  it('refuses what it cannot split, naming canaries.designs and the fix', () => {
    const fails = (text: string, pattern: RegExp) => {
      let error: unknown;
      try {
        plan(text);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(UserInputErrors);
      expect(String((error as Error).message)).toMatch(pattern);
    };
    fails(grid('focal: 3, held_out: 6, designs: together'), /canaries\.designs.*multiples of 2/s);
    fails(grid('focal: 4, held_out: 4, designs: together', '[codes]'), /no cell has two or more/);
    fails(
      grid('focal: 4, held_out: 4, designs: together', '[codes, {kind: rare-tokens, length: 2, pool: 16, decoys: 50}]'),
      /one length and one candidate count.*codes has length 2 and 100 candidates/,
    );
    fails(
      grid('focal: 4, held_out: 4, designs: together', '[codes, {kind: sampled-text, length: 2, decoys: 99}]'),
      /canaries\.designs.*sampled-text cannot share a run.*remove canaries\.designs/s,
    );
  });
});

describe('designs together: pure parts', () => {
  it('shares canaries by draw order, held-out after the grid’s focal count; each auxiliary cohort in turn', () => {
    expect(['f000', 'f001', 'f002', 'h000', 'h001'].map((id) => designShare(id, 3, 2))).toEqual([0, 1, 0, 1, 0]);
    expect(['x0-000', 'x0-001', 'x0-002', 'x1-000', 'x12-001'].map((id) => designShare(id, 3, 2))).toEqual([
      0, 1, 0, 0, 1,
    ]);
    expect(['x0-000', 'x0-001', 'x0-002', 'x0-003'].map((id) => designShare(id, 3, 3))).toEqual([0, 1, 2, 0]);
  });

  it('joins alphabets and refuses unequal lengths or candidate counts', () => {
    expect(
      togetherSpace([
        { label: 'a', space: { alphabet: '10', length: 2 }, size: 4 },
        { label: 'b', space: { alphabet: '!0', length: 2 }, size: 4 },
      ]),
    ).toEqual({ space: { alphabet: '!01', length: 2 }, size: 4 });
    expect(
      togetherSpace([
        { label: 'a', space: { alphabet: '01', length: 2 }, size: 4 },
        { label: 'b', space: { alphabet: '!?', length: 3 }, size: 4 },
      ]),
    ).toHaveProperty('problem');
  });

  it('merges cells that differ only in the design; ids drop the design part, labels may hold commas', () => {
    const cell = (design: string, seed: number): Cell =>
      ({
        id: `design=${design},seed=${seed}`,
        values: {
          design: { label: design, key: design, value: { kind: 'codes' }, path: [] },
          seed: { label: String(seed), key: String(seed), value: seed, path: [] },
        },
        labels: { design, seed },
      }) as unknown as Cell;
    const out = designsTogether([cell('codes', 0), cell('rare-tokens(l8,p16,d99)', 0), cell('codes', 1)]);
    expect(out.map((c) => [c.id, c.labels.design, c.designs?.length ?? 1])).toEqual([
      ['seed=0', 'codes+rare-tokens(l8,p16,d99)', 2],
      ['design=codes,seed=1', 'codes', 1],
    ]);
  });
});

import { messageText } from '../../src/contracts/index.js';
import { describe, expect, it } from 'vitest';
import { planAuditText, type RunLayout } from '../../src/manifest/index.js';
import { buildManifestCore } from '../../src/manifest/manifest.js';
import { REDACTED_PLACEHOLDER } from '../../src/codes/cues/index.js';
import { STAMP } from '../helpers/stamp.js';

const plan = (text: string) => planAuditText('grid.yaml', text, { ...STAMP, versions: {} });

const grid = (axes: string, extra = ''): string => `
seed: 3
axes:
${axes}
training: {batch_size: 8, updates: 100, lr: 0.001}
canaries: {focal: 6, held_out: 4}
${extra}`;

const positionsOf = (run: RunLayout, cohort = 'focal'): Record<string, number[]> =>
  Object.fromEntries(run.canaries.filter((c) => c.cohort === cohort).map((c) => [c.canary.id, c.positions]));
const byId = (runs: RunLayout[], id: string): RunLayout => {
  const run = runs.find((r) => r.cell.id === id);
  if (!run) throw new Error(`no cell ${id}; cells: ${runs.map((r) => r.cell.id).join(' | ')}`);
  return run;
};

describe('planning: budget, pairing and controls', () => {
  it('keeps the row budget fixed and puts the same canaries on the same rows across paired axes', () => {
    const p = plan(
      grid(
        '  visibility: [visible, redacted, encoded:binary]\n  dose: [2]\n  placement: [early, late]\n  schedule: [constant, cosine]\n  seed: [0, 1]\n  model: [tiny, tiny-small]',
      ),
    );
    expect(p.runs).toHaveLength(48);
    for (const run of p.runs) {
      expect(run.stats.rows).toBe(800);
      expect(run.stats.canaryRows).toBe(12);
    }
    // Paired within a seed; each seed its own placement (the one-base default: joint seeds).
    const groups = new Map<string, string>();
    for (const run of p.runs) {
      const key = `${String(run.cell.labels.placement)},${String(run.cell.labels.seed)}`;
      const layout = JSON.stringify(positionsOf(run));
      if (!groups.has(key)) groups.set(key, layout);
      expect(layout).toBe(groups.get(key));
    }
    expect(groups.get('early,0')).not.toBe(groups.get('late,0'));
    expect(groups.get('early,0')).not.toBe(groups.get('early,1'));
  });

  it('gives every cell the same canaries (identity and code) and distinct codes and substitutes', () => {
    const p = plan(grid('  visibility: [visible, redacted]\n  dose: [1, 3]\n  population: [single-dose, none]'));
    const cores = p.runs.map((run) => buildManifestCore(p.grid, p.auditId, p.pool, run));
    const f000 = cores.flatMap((m) => [...m.canaries, ...m.held_out]).filter((c) => c.id === 'f000');
    expect(f000).toHaveLength(6);
    expect(new Set(f000.map((c) => `${c.identity}|${c.code}`)).size).toBe(1);
    const all = p.pool.all();
    expect(all).toHaveLength(10);
    const codes = new Set(all.map((c) => c.code));
    expect(codes.size).toBe(10);
    for (const c of all) expect(codes.has(c.substitute)).toBe(false);
  });

  it('makes a no-canary control run: no canaries, every focal canary held out under its own id', () => {
    const p = plan(grid('  visibility: [redacted]\n  dose: [4]\n  population: [single-dose, none]'));
    const focal = buildManifestCore(p.grid, p.auditId, p.pool, byId(p.runs, 'population=single-dose'));
    const control = buildManifestCore(p.grid, p.auditId, p.pool, byId(p.runs, 'population=none'));
    expect(control.canaries).toEqual([]);
    expect(control.audit.cell).toMatchObject({ dose: null, placement: null, population: 'none' });
    expect(control.held_out.map((h) => h.id)).toEqual([
      'f000',
      'f001',
      'f002',
      'f003',
      'f004',
      'f005',
      'h000',
      'h001',
      'h002',
      'h003',
    ]);
    for (const c of focal.canaries)
      expect(control.held_out).toContainEqual({ id: c.id, identity: c.identity, code: c.code });
    expect(focal.held_out.map((h) => h.id)).toEqual(['h000', 'h001', 'h002', 'h003']);
    expect(byId(p.runs, 'population=none').stats.canaryRows).toBe(0);
  });

  it('keeps focal positions fixed when companions join (mixed-dose), on free rows', () => {
    const p = plan(grid('  visibility: [redacted]\n  dose: [2, 8]\n  population: [single-dose, mixed-dose]'));
    const single = byId(p.runs, 'dose=2,population=single-dose');
    const mixed = byId(p.runs, 'dose=2,population=mixed-dose');
    expect(positionsOf(mixed)).toEqual(positionsOf(single));
    const companions = mixed.canaries.filter((c) => c.cohort !== 'focal');
    expect(companions.map((c) => c.canary.id)).toEqual(['x1-000', 'x1-001', 'x1-002', 'x1-003', 'x1-004', 'x1-005']);
    expect(new Set(companions.map((c) => c.dose))).toEqual(new Set([8]));
    expect(mixed.stats.appearancesByDose).toEqual({ 2: 12, 8: 48 });
    const rows = mixed.canaries.flatMap((c) => c.positions);
    expect(new Set(rows).size).toBe(rows.length);
    // In the dose-8 cell the companions are the dose-2 cohort x0: x<k> always means the same dose.
    expect(
      byId(p.runs, 'dose=8,population=mixed-dose').canaries.filter((c) => c.cohort !== 'focal')[0]?.canary.id,
    ).toBe('x0-000');
  });

  it('places auxiliary cohorts strictly before or after the focal canaries', () => {
    const cohorts = (order: string): string =>
      `{kind: cohorts, name: aux-${order}, cohorts: [{dose: 3, count: 4, order: ${order}}]}`;
    const p = plan(
      grid(
        `  visibility: [redacted]\n  dose: [2]\n  placement: [middle]\n  population: [${cohorts('before')}, ${cohorts('after')}]`,
      ),
    );
    for (const run of p.runs) {
      const focalUpdates = run.canaries
        .filter((c) => c.cohort === 'focal')
        .flatMap((c) => c.positions.map((r) => Math.floor(r / 8)));
      const auxUpdates = run.canaries
        .filter((c) => c.cohort !== 'focal')
        .flatMap((c) => c.positions.map((r) => Math.floor(r / 8)));
      expect(auxUpdates).toHaveLength(12);
      if (run.cell.labels.population === 'aux-before')
        expect(Math.max(...auxUpdates)).toBeLessThan(Math.min(...focalUpdates));
      else expect(Math.min(...auxUpdates)).toBeGreaterThan(Math.max(...focalUpdates));
    }
    expect(positionsOf(p.runs[0] as RunLayout)).toEqual(positionsOf(p.runs[1] as RunLayout));
  });

  it('honours exact spacing and the final-presentation window', () => {
    const p = plan(
      grid('  visibility: [redacted]\n  dose: [3]\n  placement: [{window: [0.2, 1], spacing: 10, final: [0.8, 0.9]}]'),
    );
    for (const c of (p.runs[0] as RunLayout).canaries) {
      const updates = c.positions.map((r) => Math.floor(r / 8));
      expect(updates[1]! - updates[0]!).toBe(10);
      expect(updates[2]! - updates[1]!).toBe(10);
      expect(updates[2]).toBeGreaterThanOrEqual(80);
      expect(updates[2]).toBeLessThan(90);
    }
  });

  it('is deterministic: the same grid gives the same plan', () => {
    const text = grid('  visibility: [redacted]\n  dose: [1, 5]\n  population: [mixed-dose]');
    const a = plan(text);
    const b = plan(text);
    expect(b.auditId).toBe(a.auditId);
    expect(b.runs.map((r) => r.canaries)).toEqual(a.runs.map((r) => r.canaries));
    const c = plan(text.replace('seed: 3', 'seed: 4'));
    expect(c.auditId).not.toBe(a.auditId);
    expect(c.runs.map((r) => r.canaries)).not.toEqual(a.runs.map((r) => r.canaries));
  });
});

describe('probes and candidate spaces', () => {
  it('builds hidden, supplied and substituted probes with the shared prefill', () => {
    const p = plan(grid('  visibility: [redacted, encoded:binary]\n  dose: [1]'));
    for (const run of p.runs) {
      const m = buildManifestCore(p.grid, p.auditId, p.pool, run);
      expect(m.probes).toHaveLength((6 + 4) * 3);
      const f = m.canaries[0]!;
      const [hidden, supplied, substituted] = ['hidden', 'supplied', 'substituted'].map(
        (k) => m.probes.find((q) => q.id === `${f.id}.${k}`)!,
      );
      expect(hidden?.shown_code).toBeNull();
      // Compact rows: the cue is the input's last line, and every probe prefills the same `Ref: `.
      expect(messageText(hidden!.prompt.at(-1)!).endsWith(`\nRef: ${REDACTED_PLACEHOLDER}`)).toBe(true);
      expect(supplied?.shown_code).toBe(f.code);
      expect(substituted?.shown_code).not.toBe(f.code);
      const shown = run.cell.labels.visibility === 'redacted' ? f.code : f.cue.text;
      expect(messageText(supplied!.prompt.at(-1)!).endsWith(`\nRef: ${shown}`)).toBe(true);
      if (run.cell.labels.visibility === 'encoded:binary')
        expect(substituted?.prompt.at(-1)?.content).not.toContain(substituted?.shown_code);
      expect(new Set([hidden?.prefill, supplied?.prefill, substituted?.prefill])).toEqual(new Set(['Ref: ']));
      expect(hidden?.decode).toEqual(['prefill']);
    }
  });

  it('emits only the chosen probe kinds and decode modes, and can skip auxiliary canaries', () => {
    const p = plan(
      grid(
        '  visibility: [visible]\n  dose: [1]\n  population: [{kind: mixed-dose, doses: [2]}]',
        'probes: {kinds: [hidden], decode: [prefill, free], auxiliary: false}',
      ),
    );
    const m = buildManifestCore(p.grid, p.auditId, p.pool, p.runs[0] as RunLayout);
    expect(m.canaries).toHaveLength(12);
    expect(m.probes.map((q) => q.id)).toEqual([
      ...['f000', 'f001', 'f002', 'f003', 'f004', 'f005', 'h000', 'h001', 'h002', 'h003'].map((id) => `${id}.hidden`),
    ]);
    expect(m.probes[0]?.decode).toEqual(['prefill', 'free']);
  });

  it('describes exhaustive and sampled candidate spaces', () => {
    const ex = plan(grid('  visibility: [redacted]\n  dose: [1]'));
    expect(buildManifestCore(ex.grid, ex.auditId, ex.pool, ex.runs[0] as RunLayout).candidate_space).toEqual({
      kind: 'exhaustive',
      alphabet: '0123456789',
      length: 4,
      size: 10000,
    });
    const sp = plan(grid('  visibility: [redacted]\n  dose: [1]', 'candidates: {kind: sampled, decoys: 50}'));
    const m = buildManifestCore(sp.grid, sp.auditId, sp.pool, sp.runs[0] as RunLayout);
    expect(m.candidate_space).toMatchObject({ kind: 'sampled', size: 51, decoys: 50 });
    for (const c of [...m.canaries, ...m.held_out]) {
      expect(c.candidates).toHaveLength(51);
      expect(c.candidates).toContain(c.code);
    }
  });
});

describe('randomized inclusion', () => {
  const text = (inclusion: string) => `
seed: 3
axes:
  visibility: [redacted]
  dose: [2]
training: {batch_size: 8, updates: 100, lr: 0.001}
canaries: {focal: 10, held_out: 10${inclusion}}
`;

  it('inserts each pool canary by its own coin, the same draw in every run, and records it in the manifest', () => {
    const fixed = plan(text(''));
    const p = plan(text(', inclusion: randomized'));
    const ids = (xs: { id: string }[]) => xs.map((x) => x.id).sort();
    const all = ids([...fixed.pool.focal, ...fixed.pool.heldOut]);
    // Same 20 canaries (ids and codes), split differently.
    expect(ids([...p.pool.focal, ...p.pool.heldOut])).toEqual(all);
    expect(ids(p.pool.focal)).not.toEqual(ids(fixed.pool.focal));
    expect(p.pool.focal.some((c) => c.id.startsWith('h')) || p.pool.heldOut.some((c) => c.id.startsWith('f'))).toBe(
      true,
    );
    const run = p.runs[0] as RunLayout;
    expect(run.canaries.map((c) => c.canary.id).sort()).toEqual(ids(p.pool.focal));
    const core = buildManifestCore(p.grid, p.auditId, p.pool, run);
    expect(core.inclusion).toEqual({ kind: 'randomized', p: 0.5, pool: 20, seed: 3 });
    expect(
      buildManifestCore(fixed.grid, fixed.auditId, fixed.pool, fixed.runs[0] as RunLayout).inclusion,
    ).toBeUndefined();
    // Reproducible from the grid seed.
    expect(ids(plan(text(', inclusion: randomized')).pool.focal)).toEqual(ids(p.pool.focal));
  });
});

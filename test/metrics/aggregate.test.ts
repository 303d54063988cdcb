import { describe, expect, it } from 'vitest';
import { aggregateGroups, matchNoCanaryRuns } from '../../src/metrics/aggregate.js';
import { cellLabel, DEFAULT_AXIS_ROLES, groupCell, varyingAxes } from '../../src/metrics/cells.js';
import { exposure } from '../../src/metrics/exposure.js';
import type { CanaryRole, Observation } from '../../src/metrics/observation.js';
import { pairedComparisons } from '../../src/metrics/paired.js';
import { median } from '../../src/metrics/statistics.js';
import { bootstrapMedian } from '../../src/metrics/bootstrap.js';
import type { RunMeta } from '../../src/metrics/space-check.js';

const C = 10000;

function obs(
  run: string,
  canary: string,
  rank: number,
  extra: Partial<Observation> & { role?: CanaryRole } = {},
): Observation {
  const role = extra.role ?? (canary.startsWith('h') ? 'held_out' : 'focal');
  const inserted = role === 'focal' || role === 'auxiliary';
  return {
    run_id: run,
    phase: 'final',
    update: 100,
    canary_id: canary,
    code: `0${canary.slice(1).padStart(3, '0')}`,
    role,
    cohort: inserted ? 'focal' : null,
    dose: inserted ? 8 : null,
    visibility: inserted ? 'redacted' : null,
    probe_id: `${canary}.hidden`,
    probe_kind: 'hidden',
    shown_code: null,
    space_kind: 'exhaustive',
    space_size: C,
    rank,
    ties: 0,
    exposure: exposure(rank, extra.space_size ?? C),
    exposure_ceiling: Math.log2(extra.space_size ?? C),
    true_score: -1,
    best_other_score: -2,
    shown_rank: null,
    shown_exposure: null,
    greedy_prefill: { code: rank === 1 ? 'x' : null, recovered: rank === 1, copied: null },
    greedy_free: null,
    ...extra,
  };
}

const run = (run_id: string, cell: Record<string, unknown>, no_canary = false): RunMeta => ({
  run_id,
  cell,
  source: `/audit/runs/${run_id}/output/result.json`,
  no_canary,
});
const E = (rank: number): number => exposure(rank, C);
const opts = { seed: 1, resamples: 500, roles: DEFAULT_AXIS_ROLES };

describe('cells', () => {
  it('groups without seed axes, a numeric dose or axes that do not apply (null), keeping a dose label', () => {
    expect(groupCell({ seed: 2, dose: 8, visibility: 'redacted' }, DEFAULT_AXIS_ROLES)).toEqual({
      visibility: 'redacted',
    });
    expect(groupCell({ seed: 2, dose: 'mixed' }, DEFAULT_AXIS_ROLES)).toEqual({ dose: 'mixed' });
    expect(groupCell({ seed: 0, dose: null, placement: null, population: 'none' }, DEFAULT_AXIS_ROLES)).toEqual({
      population: 'none',
    });
  });

  it('labels cells by the axes that vary', () => {
    const cells = [
      { model: 'tiny', placement: 'early', seed: 0 },
      { model: 'tiny', placement: 'late', seed: 1 },
      { model: 'tiny', placement: null, population: 'none', seed: 0 },
    ];
    const vary = varyingAxes(cells);
    expect([...vary].sort()).toEqual(['placement', 'population', 'seed']);
    expect(cellLabel({ model: 'tiny', placement: 'late' }, vary)).toBe('placement=late');
    expect(cellLabel({ model: 'tiny', placement: null, population: 'none' }, vary)).toBe('population=none');
    expect(cellLabel({ model: 'tiny' }, vary)).toBe('(all runs)');
    expect(cellLabel({ window: [0.8, 1], b: 'x' })).toBe('b=x, window=[0.8,1]');
  });
});

describe('aggregateGroups', () => {
  const runs = [
    run('r0', { population: 'single', dose: 8, seed: 0 }),
    run('r1', { population: 'single', dose: 8, seed: 1 }),
    run('n0', { population: 'none', seed: 0 }, true),
    run('n1', { population: 'none', seed: 1 }, true),
  ];
  const observations = [
    obs('r0', 'f0', 1),
    obs('r0', 'f1', 4),
    obs('r1', 'f0', 2),
    obs('r1', 'f1', 1),
    obs('r0', 'h0', 5000),
    obs('r1', 'h0', 2500),
    obs('r0', 'f0', 9000, { phase: 'base', update: 0 }),
    obs('r0', 'f1', 7000, { phase: 'base', update: 0 }),
    obs('r1', 'f0', 9000, { phase: 'base', update: 0 }),
    obs('r1', 'f1', 7000, { phase: 'base', update: 0 }),
    obs('n0', 'f0', 100, { role: 'no_canary', cohort: null, dose: null, visibility: null }),
    obs('n0', 'f1', 200, { role: 'no_canary', cohort: null, dose: null, visibility: null }),
    obs('n1', 'f0', 300, { role: 'no_canary', cohort: null, dose: null, visibility: null }),
    obs('n1', 'f1', 400, { role: 'no_canary', cohort: null, dose: null, visibility: null }),
  ];

  it('pairs each run with the no-canary run of its own seed', () => {
    expect(Object.fromEntries(matchNoCanaryRuns(runs, observations))).toEqual({ r0: ['n0'], r1: ['n1'] });
  });

  it('pools seeds into one group with its n and all three controls', () => {
    const groups = aggregateGroups(runs, observations, opts);
    expect(groups).toHaveLength(1);
    const g = groups[0]!;
    expect(g.cell).toEqual({ population: 'single' });
    expect(g.dose).toBe(8);
    expect(g.space).toEqual({ kind: 'exhaustive', size: C, ceiling: Math.log2(C) });
    expect(g.inserted).toMatchObject({ n_obs: 4, n_canaries: 2, n_runs: 2 });
    expect(g.inserted.exposure?.estimate).toBeCloseTo(median([E(1), E(4), E(2), E(1)]), 12);
    expect(g.inserted.top1).toMatchObject({ k: 2, n: 4 });
    expect(g.inserted.recovery.prefill).toMatchObject({ k: 2, n: 4 });
    expect(g.inserted.recovery.free).toBeNull();
    expect(g.inserted.copy).toBeNull();

    expect(g.controls.held_out).toMatchObject({ n_obs: 2, n_canaries: 1, n_runs: 2 });
    expect(g.controls.held_out?.exposure?.estimate).toBeCloseTo(median([E(5000), E(2500)]), 12);
    expect(g.controls.held_out?.difference?.estimate).toBeCloseTo(
      median([E(1), E(4), E(2), E(1)]) - median([E(5000), E(2500)]),
      12,
    );

    expect(g.controls.base).toMatchObject({ n_obs: 4, n_canaries: 2 });
    expect(g.controls.base?.exposure?.estimate).toBeCloseTo(median([E(9000), E(7000)]), 12);

    expect(g.controls.no_canary).toMatchObject({ n_obs: 4, n_canaries: 2, n_runs: 2 });
    expect(g.controls.no_canary?.exposure?.estimate).toBeCloseTo(median([E(100), E(200), E(300), E(400)]), 12);
  });

  it('groups a mixed-dose run by each canary’s own dose', () => {
    const mixed = [run('m', { population: 'mixed', dose: 'mixed', seed: 0 })];
    const groups = aggregateGroups(
      mixed,
      [obs('m', 'f0', 1, { dose: 2 }), obs('m', 'f1', 3, { dose: 16 }), obs('m', 'f2', 5, { dose: 16 })],
      opts,
    );
    expect(groups.map((g) => [g.dose, g.inserted.n_obs])).toEqual([
      [2, 1],
      [16, 2],
    ]);
    expect(groups[0]?.cell).toEqual({ dose: 'mixed', population: 'mixed' });
    expect(groups[0]?.controls.held_out).toBeNull();
  });

  it('refuses to pool exposures from candidate spaces of different size, naming the file', () => {
    const rs = [run('a', { seed: 0 }), run('b', { seed: 1 })];
    const mixedSpaces = [obs('a', 'f0', 1), obs('b', 'f0', 1, { space_kind: 'sampled', space_size: 100 })];
    expect(() => aggregateGroups(rs, mixedSpaces, opts)).toThrow(
      /mixes candidate spaces.*\/audit\/runs\/a\/output\/result\.json/,
    );
  });
});

describe('run-aware intervals', () => {
  const width = (m: { lo: number; hi: number } | null | undefined): number => (m?.hi as number) - (m?.lo as number);
  // Six seeds of one cell, 20 canaries each; `rankOf(run, canary)` sets each exposure.
  function audit(rankOf: (r: number, c: number) => number) {
    const rs = Array.from({ length: 6 }, (_, r) => run(`r${r}`, { population: 'single', seed: r }));
    const o = rs.flatMap((x, r) => Array.from({ length: 20 }, (_, c) => obs(x.run_id, `f${c}`, rankOf(r, c))));
    return { rs, o };
  }

  it('widens the interval when run-to-run spread dominates', () => {
    // Each run shifts every canary by the same amount (4^r); canaries within a run barely differ.
    const { rs, o } = audit((r, c) => 4 ** r * (1 + (c % 3)));
    const g = aggregateGroups(rs, o, opts)[0]!;
    const flat = bootstrapMedian(
      o.map((x) => x.exposure),
      { seed: 1, label: 'canaries only', resamples: 500 },
    );
    expect(g.inserted.exposure).toMatchObject({ resampling: 'crossed', method: 'studentized', n_clusters: 6, n: 120 });
    expect(flat?.resampling).toBe('flat');
    expect(width(g.inserted.exposure)).toBeGreaterThan(2 * width(flat));
  });

  it('gives about the one-run interval of the 20 canaries when runs are identical', () => {
    // Crossed: six identical runs hold the same 20 canaries, so there are 20 independent values,
    // not 120.
    const { rs, o } = audit((_, c) => 1 + ((c * 37) % 97) * 50);
    const g = aggregateGroups(rs, o, opts)[0]!;
    const flat = bootstrapMedian(
      o.filter((x) => x.run_id === 'r0').map((x) => x.exposure),
      { seed: 1, label: 'canaries only', resamples: 500 },
    );
    const ratio = width(g.inserted.exposure) / width(flat);
    expect(ratio).toBeGreaterThan(0.75);
    expect(ratio).toBeLessThan(1.33);
  });

  it('resamples a single run by canaries only, exactly as before, and says so', () => {
    const o = Array.from({ length: 12 }, (_, c) => obs('r0', `f${c}`, 1 + c * c * 7));
    const g = aggregateGroups([run('r0', { population: 'single', seed: 0 })], o, opts)[0]!;
    const flat = bootstrapMedian(
      o.map((x) => x.exposure),
      { seed: opts.seed, label: `${g.key}|inserted`, resamples: opts.resamples },
    );
    expect(g.inserted.exposure).toEqual(flat);
    expect(g.inserted.exposure?.resampling).toBe('flat');
  });

  it('resamples paired differences by run pair and canary (crossed: the same canaries in every pair)', () => {
    const rs = Array.from({ length: 4 }, (_, s) => [
      run(`e${s}`, { placement: 'early', seed: s }),
      run(`l${s}`, { placement: 'late', seed: s }),
    ]).flat();
    // Seed s moves every canary by 4^s in the late run: the run pairs disagree, canaries do not.
    const o = Array.from({ length: 4 }, (_, s) =>
      Array.from({ length: 15 }, (_, c) => [
        obs(`e${s}`, `f${c}`, 4000 + c),
        obs(`l${s}`, `f${c}`, Math.max(1, Math.round((4000 + c) / 4 ** (s + 1)))),
      ]).flat(),
    ).flat();
    const p = pairedComparisons(rs, o, { ...opts, axes: [{ name: 'placement', values: ['early', 'late'] }] })[0]!;
    expect(p.difference).toMatchObject({ resampling: 'crossed', n_clusters: 4, n: 60 });
    const flat = bootstrapMedian(
      o
        .filter((x) => x.run_id.startsWith('l'))
        .map((x, i) => x.exposure - (o.filter((y) => y.run_id.startsWith('e'))[i] as Observation).exposure),
      { seed: 1, label: 'pairs only', resamples: 500 },
    );
    expect(width(p.difference)).toBeGreaterThan(2 * width(flat));
  });
});

describe('pairedComparisons', () => {
  const runs = [
    run('e0', { placement: 'early', seed: 0 }),
    run('l0', { placement: 'late', seed: 0 }),
    run('e1', { placement: 'early', seed: 1 }),
    run('l1', { placement: 'late', seed: 1 }),
    run('x', { placement: 'late', seed: 0, schedule: 'cosine' }),
  ];
  const axes = [
    { name: 'placement', values: ['early', 'late'] },
    { name: 'seed', values: [0, 1] },
  ];
  const observations = [
    obs('e0', 'f0', 100),
    obs('l0', 'f0', 1),
    obs('e0', 'f1', 10),
    obs('l0', 'f1', 20),
    obs('e1', 'f0', 50),
    obs('l1', 'f0', 50),
    obs('e0', 'h0', 3000),
    obs('l0', 'h0', 3000),
    obs('x', 'f0', 1),
    // Same id, different code in l1: not the same canary, never paired.
    obs('e1', 'f2', 7),
    obs('l1', 'f2', 7, { code: '9999' }),
  ];

  it('pairs canaries by id and code across runs differing in one axis, later minus earlier', () => {
    const paired = pairedComparisons(runs, observations, { ...opts, axes });
    const focal = paired.find((p) => p.cohort === 'focal')!;
    expect(focal).toMatchObject({
      axis: 'placement',
      from: 'early',
      to: 'late',
      context: {},
      n_pairs: 3,
      n_run_pairs: 2,
      n_canaries: 2,
      rose: 1,
      fell: 1,
      tied: 1,
      dose: 8,
    });
    const diffs = [E(1) - E(100), E(20) - E(10), 0];
    expect(focal.difference.estimate).toBeCloseTo(median(diffs), 12);
    expect(focal.difference.lo).toBeLessThanOrEqual(focal.difference.estimate);
    const held = paired.find((p) => p.cohort === 'held_out')!;
    expect(held).toMatchObject({ n_pairs: 1, tied: 1 });
    // Seed-only and two-axis differences are not comparisons.
    expect(paired.every((p) => p.axis === 'placement' || p.axis === 'schedule')).toBe(true);
    expect(paired.filter((p) => p.axis === 'schedule')).toHaveLength(1);
  });

  it('takes placements in time order whatever order the grid lists them in', () => {
    const reversed = [{ name: 'placement', values: ['late', 'early'] }];
    const paired = pairedComparisons(runs, observations, { ...opts, axes: reversed });
    const focal = paired.find((p) => p.cohort === 'focal' && p.axis === 'placement')!;
    expect([focal.from, focal.to]).toEqual(['early', 'late']);
    expect(focal.difference.estimate).toBeCloseTo(median([E(1) - E(100), E(20) - E(10), 0]), 12);
  });

  it('orders other labels by the grid’s axis values, not alphabetically', () => {
    const rs = [run('s', { population: 'single', seed: 0 }), run('m', { population: 'mixed', seed: 0 })];
    const o = [obs('s', 'f0', 10), obs('m', 'f0', 1)];
    const paired = pairedComparisons(rs, o, { ...opts, axes: [{ name: 'population', values: ['single', 'mixed'] }] });
    expect([paired[0]?.from, paired[0]?.to]).toEqual(['single', 'mixed']);
  });

  it('orders doses numerically: 1 → 4 before 1 → 16, contexts dose=4 before dose=16', () => {
    const doses = [1, 16, 4];
    const rs = doses.flatMap((d) => [
      run(`d${d}`, { dose: d, placement: 'early', seed: 0 }),
      run(`l${d}`, { dose: d, placement: 'late', seed: 0 }),
    ]);
    const o = rs.map((r, i) => obs(r.run_id, 'f0', 1 + i, { dose: r.cell.dose as number }));
    // The grid lists the doses out of order, and as text they sort 1, 16, 4.
    const paired = pairedComparisons(rs, o, { ...opts, axes: [{ name: 'dose', values: [1, 16, 4] }] });
    const byDose = paired
      .filter((p) => p.axis === 'dose' && p.context.placement === 'early')
      .map((p) => `${String(p.from)} → ${String(p.to)}`);
    expect(byDose).toEqual(['1 → 4', '1 → 16', '4 → 16']);
    const byPlacement = paired.filter((p) => p.axis === 'placement').map((p) => p.context.dose);
    expect(byPlacement).toEqual([1, 4, 16]);
    const groups = aggregateGroups(
      rs,
      o.map((x) => ({ ...x, cohort: 'focal' })),
      { ...opts, axes: [{ name: 'dose', values: [1, 16, 4] }] },
    );
    expect(groups.filter((g) => g.label.includes('early')).map((g) => g.dose)).toEqual([1, 4, 16]);
  });

  it('pairs a focal canary with itself in a no-canary run', () => {
    const rs = [run('none', { population: 'none', seed: 0 }, true), run('single', { population: 'single', seed: 0 })];
    const o = [obs('none', 'f0', 4000, { role: 'no_canary', cohort: null, dose: null }), obs('single', 'f0', 1)];
    const paired = pairedComparisons(rs, o, { ...opts, axes: [{ name: 'population', values: ['none', 'single'] }] });
    expect(paired).toHaveLength(1);
    expect(paired[0]).toMatchObject({ cohort: 'focal', dose: 8, rose: 1, n_pairs: 1 });
    expect(paired[0]?.difference.estimate).toBeCloseTo(E(1) - E(4000), 12);
  });
});

import { canonicalJson } from '../hash.js';
import { bootstrapMedian, clusteredSample, type MedianInterval } from './bootstrap.js';
import {
  cellLabel,
  compareAxisValues,
  compareCells,
  differingAxes,
  formatValue,
  valueKey,
  type Axis,
  type AxisRoles,
  type Cell,
} from './cells.js';
import { median } from './statistics.js';
import { canaryKey, designCell, phaseOrder, PROBE_KIND_ORDER, type Observation } from './observation.js';
import { commonSpace, type RunMeta, type SpaceSummary } from './space-check.js';
import type { StatOptions } from './arm.js';
import type { ProbeKind } from '../contracts/manifest.js';

/**
 * Paired comparisons: two runs whose cells differ in exactly one (non-seed) axis, and a canary
 * present in both with the same id AND the same code, give one paired difference
 * exposure(to) − exposure(from), where `to` is the later value in the grid's axis order (late −
 * early, mixed − single, redacted − visible). Pairs are pooled over seeds; per comparison: n pairs,
 * how many rose, fell or tied, and the median paired difference with a bootstrap interval.
 * Held-out canaries are paired with themselves too: their shift is the comparison's null.
 */
export interface PairedSummary {
  key: string;
  axis: string;
  from: unknown;
  to: unknown;
  /** The other axes (seed axes removed), shared by both sides. */
  context: Cell;
  label: string;
  /** focal, an auxiliary cohort, or held_out. */
  cohort: string;
  /** The canaries' dose when both sides agree (null when the comparison changes it). */
  dose: number | null;
  probe_kind: ProbeKind;
  phase: string;
  space: SpaceSummary;
  n_pairs: number;
  /** Distinct (from-run, to-run) pairs contributing. */
  n_run_pairs: number;
  n_canaries: number;
  rose: number;
  fell: number;
  tied: number;
  from_median: number;
  to_median: number;
  /** Median of the paired differences (to − from) with its bootstrap interval. */
  difference: MedianInterval;
}

export interface PairedOptions extends StatOptions {
  roles: AxisRoles;
  axes: readonly Axis[];
  /** Axes named in labels (default: all); see `varyingAxes`. */
  labelAxes?: ReadonlySet<string>;
}

interface Pair {
  from: Observation;
  to: Observation;
}

function cohortOf(o: Observation): string {
  return o.role === 'held_out' ? 'held_out' : (o.cohort ?? 'focal');
}

type PairMeta = Omit<
  PairedSummary,
  | 'key'
  | 'space'
  | 'n_pairs'
  | 'n_run_pairs'
  | 'n_canaries'
  | 'rose'
  | 'fell'
  | 'tied'
  | 'from_median'
  | 'to_median'
  | 'difference'
>;
type PairGroup = { meta: PairMeta; pairs: Pair[]; runPairs: Set<string> };
/** A run's observations (base phase left out) by phase, probe kind and canary. */
type RunIndex = Map<string, Observation>;

export function pairedComparisons(
  runs: readonly RunMeta[],
  observations: readonly Observation[],
  options: PairedOptions,
): PairedSummary[] {
  const runById = new Map(runs.map((r) => [r.run_id, r]));
  const byRun = indexByRun(observations, runById);
  const ordered = runs.filter((r) => byRun.has(r.run_id));
  const groups = new Map<string, PairGroup>();
  for (const [i, j] of singleAxisPairs(ordered, options.roles.seedAxes)) {
    const oriented = orientPair(ordered[i] as RunMeta, ordered[j] as RunMeta, options);
    if (oriented) pairObservations(oriented, byRun, options, groups);
  }
  return [...groups].map(([key, group]) => summarise(key, group, runById, options)).sort(pairedOrder(options));
}

/**
 * Index pairs (i < j, in that order) of runs whose cells differ in exactly one axis other than a
 * seed axis. Runs are bucketed by their cell without that axis, so the work follows the pairs
 * there are, not runs²: comparing every two cells took 50 million comparisons at 10,000 runs.
 */
export function singleAxisPairs(runs: readonly RunMeta[], seedAxes: readonly string[]): [number, number][] {
  const keys = [...new Set(runs.flatMap((r) => Object.keys(r.cell)))].sort();
  const values = runs.map((r) => keys.map((k) => valueKey(r.cell[k])));
  const out: [number, number][] = [];
  keys.forEach((axis, a) => {
    if (seedAxes.includes(axis)) return;
    const buckets = new Map<string, Map<string, number[]>>();
    values.forEach((v, i) => {
      const rest = JSON.stringify(v.filter((_, b) => b !== a));
      let byValue = buckets.get(rest);
      if (!byValue) buckets.set(rest, (byValue = new Map()));
      const value = v[a] as string;
      const same = byValue.get(value);
      if (same) same.push(i);
      else byValue.set(value, [i]);
    });
    for (const byValue of buckets.values()) {
      const sides = [...byValue.values()];
      for (let x = 0; x < sides.length; x += 1) {
        for (let y = x + 1; y < sides.length; y += 1) {
          for (const i of sides[x] as number[]) for (const j of sides[y] as number[]) out.push(i < j ? [i, j] : [j, i]);
        }
      }
    }
  });
  return out.sort((p, q) => p[0] - q[0] || p[1] - q[1]);
}

function indexByRun(observations: readonly Observation[], runById: Map<string, RunMeta>): Map<string, RunIndex> {
  const byRun = new Map<string, RunIndex>();
  for (const o of observations) {
    if (o.phase === 'base' || !runById.has(o.run_id)) continue;
    let index = byRun.get(o.run_id);
    if (!index) byRun.set(o.run_id, (index = new Map()));
    index.set(`${o.phase}|${o.probe_kind}|${canaryKey(o)}`, o);
  }
  return byRun;
}

/**
 * Two runs whose cells differ in exactly one axis (not a seed axis), ordered by that axis's
 * value order (numbers numerically, placements in time order, else grid order), with the axes
 * they share as context; null for any other pair.
 */
function orientPair(
  a: RunMeta,
  b: RunMeta,
  options: PairedOptions,
): { axis: string; from: RunMeta; to: RunMeta; context: Cell } | null {
  const diff = differingAxes(a.cell, b.cell);
  const axis = diff[0];
  if (diff.length !== 1 || axis === undefined || options.roles.seedAxes.includes(axis)) return null;
  const aFirst = compareAxisValues(options.axes, axis, a.cell[axis], b.cell[axis]) <= 0;
  const [from, to] = aFirst ? [a, b] : [b, a];
  const context: Cell = {};
  for (const k of Object.keys(from.cell).sort()) {
    if (k !== axis && !options.roles.seedAxes.includes(k) && from.cell[k] !== null) context[k] = from.cell[k];
  }
  return { axis, from, to, context };
}

/** Pair each observation of `from` with the same canary, probe kind and phase in `to`, grouped by comparison. */
function pairObservations(
  { axis, from, to, context }: { axis: string; from: RunMeta; to: RunMeta; context: Cell },
  byRun: Map<string, RunIndex>,
  options: PairedOptions,
  groups: Map<string, PairGroup>,
): void {
  const toIndex = byRun.get(to.run_id) as RunIndex;
  for (const [k, f] of byRun.get(from.run_id) as RunIndex) {
    const t = toIndex.get(k);
    if (!t) continue;
    // Held-out pairs only with held-out; two never-inserted sides say nothing about insertion.
    if ((f.role === 'held_out') !== (t.role === 'held_out')) continue;
    if (f.role === 'no_canary' && t.role === 'no_canary') continue;
    const fc = f.role === 'no_canary' ? cohortOf(t) : cohortOf(f);
    const tc = t.role === 'no_canary' ? cohortOf(f) : cohortOf(t);
    const cohort = fc === tc ? fc : `${fc}→${tc}`;
    const doses = [f.dose, t.dose].filter((d): d is number => d !== null);
    const dose = doses.length > 0 && doses.every((d) => d === doses[0]) ? (doses[0] as number) : null;
    // Designs together: a canary pairs with itself (same id and code, so the same design), per design.
    const here = designCell(context, f);
    const meta: PairMeta = {
      axis,
      from: from.cell[axis],
      to: to.cell[axis],
      context: here,
      label: cellLabel(here, options.labelAxes),
      cohort,
      dose,
      probe_kind: f.probe_kind,
      phase: f.phase,
    };
    const key = canonicalJson({ ...meta, from: meta.from ?? null, to: meta.to ?? null });
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { meta, pairs: [], runPairs: new Set() }));
    group.pairs.push({ from: f, to: t });
    group.runPairs.add(`${from.run_id}|${to.run_id}`);
  }
}

function summarise(
  key: string,
  { meta, pairs, runPairs }: PairGroup,
  runById: Map<string, RunMeta>,
  options: PairedOptions,
): PairedSummary {
  const what = `paired comparison ${meta.axis} ${formatValue(meta.from)} → ${formatValue(meta.to)} (${meta.label})`;
  const space = commonSpace(
    what,
    pairs.flatMap((p) => [p.from, p.to]),
    runById,
  ) as SpaceSummary;
  const diffs = pairs.map((p) => p.to.exposure - p.from.exposure);
  return {
    key,
    ...meta,
    space,
    n_pairs: pairs.length,
    n_run_pairs: runPairs.size,
    n_canaries: new Set(pairs.map((p) => canaryKey(p.from))).size,
    rose: diffs.filter((d) => d > 0).length,
    fell: diffs.filter((d) => d < 0).length,
    tied: diffs.filter((d) => d === 0).length,
    from_median: median(pairs.map((p) => p.from.exposure)),
    to_median: median(pairs.map((p) => p.to.exposure)),
    // Run pairs and canaries: crossed when every run pair holds the same canaries, else nested.
    difference: bootstrapMedian(
      clusteredSample(
        diffs,
        pairs.map((p) => `${p.from.run_id}|${p.to.run_id}`),
        pairs.map((p) => canaryKey(p.from)),
      ),
      {
        seed: options.seed,
        label: `${key}|paired`,
        bounds: [-space.ceiling, space.ceiling],
        ...(options.resamples !== undefined ? { resamples: options.resamples } : {}),
        ...(options.confidence !== undefined ? { confidence: options.confidence } : {}),
        ...(options.median !== undefined ? { median: options.median } : {}),
      },
    ) as MedianInterval,
  };
}

/**
 * Axis, then the values in order (`1 → 4` before `1 → 16`), focal before held-out, context (values
 * compared as values: dose=4 before dose=16), probe kind, dose, phase.
 */
function pairedOrder(options: PairedOptions): (a: PairedSummary, b: PairedSummary) => number {
  return (a, b) =>
    a.axis.localeCompare(b.axis) ||
    compareAxisValues(options.axes, a.axis, a.from, b.from) ||
    compareAxisValues(options.axes, a.axis, a.to, b.to) ||
    Number(a.cohort === 'held_out') - Number(b.cohort === 'held_out') ||
    a.cohort.localeCompare(b.cohort) ||
    compareCells(options.axes, a.context, b.context) ||
    a.label.localeCompare(b.label) ||
    PROBE_KIND_ORDER.indexOf(a.probe_kind) - PROBE_KIND_ORDER.indexOf(b.probe_kind) ||
    (a.dose ?? 0) - (b.dose ?? 0) ||
    phaseOrder(a.phase) - phaseOrder(b.phase);
}

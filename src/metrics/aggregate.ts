import { canonicalJson } from '../hash.js';
import { exposuresByRun, summarizeArm, type ArmSummary, type StatOptions } from './arm.js';
import { bootstrapMedianDifference, type DifferenceInterval } from './bootstrap.js';
import { cellLabel, compareCells, groupCell, valueKey, type Axis, type AxisRoles, type Cell } from './cells.js';
import { canaryKey, designCell, phaseOrder, PROBE_KIND_ORDER, type Observation } from './observation.js';
import { commonSpace, type RunMeta, type SpaceSummary } from './space-check.js';
import type { ProbeKind } from '../contracts/manifest.js';

/**
 * Aggregates over inserted canaries, one group per (grid cell without its seed axes, cohort, the
 * canary's own dose, cue visibility, probe kind, phase), pooled over canaries and seed
 * repetitions. Every group carries its three controls side by side, each with the difference
 * inserted − control (difference of medians, bootstrap interval):
 * - held_out: never-inserted canaries of the same runs (the prior control);
 * - base: the same canaries scored by the model before fine-tuning (phase `base`);
 * - no_canary: the same canaries (id and code) in the best-matching run that inserts no canary.
 */
export interface ControlSummary extends ArmSummary {
  /** median(inserted) − median(control). */
  difference: DifferenceInterval | null;
}

export interface GroupSummary {
  key: string;
  cell: Cell;
  label: string;
  cohort: string;
  dose: number | null;
  visibility: string | null;
  probe_kind: ProbeKind;
  phase: string;
  update: number;
  space: SpaceSummary;
  inserted: ArmSummary;
  controls: {
    held_out: ControlSummary | null;
    base: ControlSummary | null;
    no_canary: ControlSummary | null;
  };
}

export interface AggregateOptions extends StatOptions {
  roles: AxisRoles;
  /** Axes in grid order, for ordering values that are neither numbers nor placements (default: none). */
  axes?: readonly Axis[];
  /** Axes named in labels (default: all); see `varyingAxes`. */
  labelAxes?: ReadonlySet<string>;
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/**
 * For each run that inserts canaries, the no-canary runs that pair with it: among runs that hold
 * at least one of its canaries as never seen, those agreeing with it on the most axes (so seed 1
 * pairs with the no-canary run of seed 1 when the grid has one per seed).
 */
export function matchNoCanaryRuns(
  runs: readonly RunMeta[],
  observations: readonly Observation[],
): Map<string, string[]> {
  const unseen = new Map<string, Set<string>>();
  const inserted = new Map<string, Set<string>>();
  for (const o of observations) {
    if (o.role === 'no_canary') {
      const set = unseen.get(o.run_id) ?? new Set<string>();
      set.add(canaryKey(o));
      unseen.set(o.run_id, set);
    } else if (o.role === 'focal' || o.role === 'auxiliary') {
      const set = inserted.get(o.run_id) ?? new Set<string>();
      set.add(canaryKey(o));
      inserted.set(o.run_id, set);
    }
  }
  const controls = runs.filter((r) => r.no_canary && unseen.has(r.run_id));
  const out = new Map<string, string[]>();
  for (const run of runs) {
    const mine = inserted.get(run.run_id);
    if (run.no_canary || !mine) continue;
    let best = -1;
    let chosen: string[] = [];
    for (const control of controls) {
      const theirs = unseen.get(control.run_id) as Set<string>;
      if (![...mine].some((k) => theirs.has(k))) continue;
      const keys = new Set([...Object.keys(run.cell), ...Object.keys(control.cell)]);
      const agree = [...keys].filter((k) => valueKey(run.cell[k]) === valueKey(control.cell[k])).length;
      if (agree > best) {
        best = agree;
        chosen = [control.run_id];
      } else if (agree === best) {
        chosen.push(control.run_id);
      }
    }
    if (chosen.length > 0) out.set(run.run_id, chosen);
  }
  return out;
}

export function aggregateGroups(
  runs: readonly RunMeta[],
  observations: readonly Observation[],
  options: AggregateOptions,
): GroupSummary[] {
  const runById = new Map(runs.map((r) => [r.run_id, r]));
  const groups = new Map<string, { cell: Cell; obs: Observation[] }>();
  const heldOut = new Map<string, Observation[]>();
  const base = new Map<string, Observation[]>();
  const unseen = new Map<string, Observation[]>();
  for (const o of observations) {
    const run = runById.get(o.run_id);
    if (!run) continue;
    if (o.role === 'held_out') {
      push(heldOut, `${o.run_id}|${o.probe_kind}|${o.phase}|${o.design ?? ''}`, o);
    } else if (o.role === 'no_canary') {
      push(unseen, `${o.run_id}|${o.probe_kind}|${o.phase}|${canaryKey(o)}`, o);
    } else if (o.phase === 'base') {
      push(base, `${o.run_id}|${o.probe_kind}|${canaryKey(o)}`, o);
    } else {
      const cell = groupCell(designCell(run.cell, o), options.roles);
      const key = canonicalJson({
        cell,
        cohort: o.cohort,
        dose: o.dose,
        visibility: o.visibility,
        kind: o.probe_kind,
        phase: o.phase,
      });
      const group = groups.get(key);
      if (group) group.obs.push(o);
      else groups.set(key, { cell, obs: [o] });
    }
  }
  const matches = matchNoCanaryRuns(runs, observations);

  const out: GroupSummary[] = [];
  for (const [key, { cell, obs }] of groups) {
    const first = obs[0] as Observation;
    const label = cellLabel(cell, options.labelAxes);
    const runIds = [...new Set(obs.map((o) => o.run_id))];
    const what = `group "${label}" (${first.cohort}, dose ${first.dose}, ${first.probe_kind}, ${first.phase})`;
    const space = commonSpace(what, obs, runById) as SpaceSummary;

    const heldObs = runIds.flatMap(
      (r) => heldOut.get(`${r}|${first.probe_kind}|${first.phase}|${first.design ?? ''}`) ?? [],
    );
    const baseObs = obs.flatMap((o) => base.get(`${o.run_id}|${o.probe_kind}|${canaryKey(o)}`) ?? []);
    const unseenSet = new Set<Observation>();
    for (const o of obs) {
      for (const control of matches.get(o.run_id) ?? []) {
        for (const u of unseen.get(`${control}|${o.probe_kind}|${o.phase}|${canaryKey(o)}`) ?? []) unseenSet.add(u);
      }
    }
    const inserted = summarizeArm(obs, `${key}|inserted`, options);
    const control = (name: string, controlObs: Observation[]): ControlSummary | null => {
      if (controlObs.length === 0) return null;
      commonSpace(`${what} against its ${name} control`, [first, ...controlObs], runById);
      return {
        ...summarizeArm(controlObs, `${key}|${name}`, options),
        difference: bootstrapMedianDifference(exposuresByRun(obs), exposuresByRun(controlObs), {
          seed: options.seed,
          label: `${key}|${name}|difference`,
          bounds: [-first.exposure_ceiling, first.exposure_ceiling],
          sideBounds: [0, first.exposure_ceiling],
          ...(options.resamples !== undefined ? { resamples: options.resamples } : {}),
          ...(options.confidence !== undefined ? { confidence: options.confidence } : {}),
          ...(options.median !== undefined ? { median: options.median } : {}),
        }),
      };
    };
    out.push({
      key,
      cell,
      label,
      cohort: first.cohort ?? 'focal',
      dose: first.dose,
      visibility: first.visibility,
      probe_kind: first.probe_kind,
      phase: first.phase,
      update: Math.max(...obs.map((o) => o.update)),
      space,
      inserted,
      controls: {
        held_out: control('held_out', heldObs),
        base: control('base', baseObs),
        no_canary: control('no_canary', [...unseenSet]),
      },
    });
  }
  const axes = options.axes ?? [];
  return out.sort((a, b) => compareGroups(axes, a, b));
}

/** Focal first, cohort, visibility, cell (values as values: 4 before 16), probe kind, dose, phase. */
function compareGroups(axes: readonly Axis[], a: GroupSummary, b: GroupSummary): number {
  return (
    Number(a.cohort !== 'focal') - Number(b.cohort !== 'focal') ||
    a.cohort.localeCompare(b.cohort) ||
    (a.visibility ?? '').localeCompare(b.visibility ?? '') ||
    compareCells(axes, a.cell, b.cell) ||
    a.label.localeCompare(b.label) ||
    PROBE_KIND_ORDER.indexOf(a.probe_kind) - PROBE_KIND_ORDER.indexOf(b.probe_kind) ||
    (a.dose ?? 0) - (b.dose ?? 0) ||
    phaseOrder(a.phase) - phaseOrder(b.phase)
  );
}

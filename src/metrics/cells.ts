import { canonicalJson } from '../hash.js';
import { PLACEMENT_PRESETS } from '../grid/axes.js';

/**
 * Grid cells as the metrics see them. Seed repetitions are pooled, so the seed axes are dropped
 * from a group's cell; a numeric dose axis is dropped too, because canaries are grouped by their
 * own dose (in a mixed-dose run one cell holds several doses). A non-numeric dose value (e.g.
 * `mixed`) is kept: it is a population label, not a dose.
 */
export type Cell = Record<string, unknown>;

export interface AxisRoles {
  /** Axes whose values are repetitions (pooled). Default ['seed']. */
  seedAxes: readonly string[];
  /** The axis holding the dose. Default 'dose'. */
  doseAxis: string;
}

export const DEFAULT_AXIS_ROLES: AxisRoles = { seedAxes: ['seed'], doseAxis: 'dose' };

export interface Axis {
  name: string;
  /** Values in the grid's order (the fallback order of `compareAxisValues`: numbers and placements have their own). */
  values: unknown[];
}

export function valueKey(value: unknown): string {
  return canonicalJson(value ?? null);
}

function isNumericDose(value: unknown): boolean {
  return (
    typeof value === 'number' || (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value)))
  );
}

/**
 * The cell a run's canaries are grouped under: seed axes, a numeric dose and axes that do not
 * apply to the run (null, e.g. placement in a no-canary cell) removed.
 */
export function groupCell(cell: Cell, roles: AxisRoles): Cell {
  const out: Cell = {};
  for (const key of Object.keys(cell).sort()) {
    if (roles.seedAxes.includes(key) || cell[key] === null || cell[key] === undefined) continue;
    if (key === roles.doseAxis && isNumericDose(cell[key])) continue;
    out[key] = cell[key];
  }
  return out;
}

/**
 * `a=1, b=late` (keys sorted; objects as compact JSON; null values omitted). When `show` is given,
 * only those axes are named — the axes that vary in the audit, so a label does not repeat the
 * model, task and schedule every cell shares. Nothing to name: `(all runs)`.
 */
export function cellLabel(cell: Cell, show?: ReadonlySet<string>): string {
  const keys = Object.keys(cell)
    .sort()
    .filter((k) => cell[k] !== null && cell[k] !== undefined && (!show || show.has(k)));
  if (keys.length === 0) return '(all runs)';
  return keys.map((k) => `${k}=${formatValue(cell[k])}`).join(', ');
}

/** Axes taking more than one value (null included) over the given cells. */
export function varyingAxes(cells: readonly Cell[]): Set<string> {
  const seen = new Map<string, Set<string>>();
  for (const cell of cells) {
    for (const [k, v] of Object.entries(cell)) {
      const set = seen.get(k) ?? new Set<string>();
      set.add(valueKey(v));
      seen.set(k, set);
    }
  }
  const keys = new Set(seen.keys());
  return new Set([...keys].filter((k) => (seen.get(k) as Set<string>).size > 1 || cells.some((c) => !(k in c))));
}

export function formatValue(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value ?? null);
}

/** Axes on which two cells disagree (a key missing from one side counts as a difference). */
export function differingAxes(a: Cell, b: Cell): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].filter((k) => valueKey(a[k]) !== valueKey(b[k])).sort();
}

/** Position of a value in its axis order (unknown values sort last, by their JSON text). */
export function axisPosition(axes: readonly Axis[], name: string, value: unknown): number {
  const axis = axes.find((x) => x.name === name);
  const i = axis ? axis.values.findIndex((v) => valueKey(v) === valueKey(value)) : -1;
  return i < 0 ? Number.MAX_SAFE_INTEGER : i;
}

function numericValue(value: unknown): number | null {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return null;
}

/** Placement presets in time order: early, middle, late (then uniform, which spans the run). */
const PLACEMENT_TIME_ORDER = Object.entries(PLACEMENT_PRESETS)
  .sort(([an, a], [bn, b]) => Number(an === 'uniform') - Number(bn === 'uniform') || a[0] - b[0] || a[1] - b[1])
  .map(([name]) => name);

/**
 * The order values of one axis are shown and compared in: numbers numerically (doses 1, 4, 16),
 * placement presets in time order (early, middle, late), anything else in the grid's order, then
 * by its text. Paired differences are taken later − earlier in this order.
 */
export function compareAxisValues(axes: readonly Axis[], name: string, a: unknown, b: unknown): number {
  const na = numericValue(a);
  const nb = numericValue(b);
  if (na !== null && nb !== null && na !== nb) return na - nb;
  if (name === 'placement' && typeof a === 'string' && typeof b === 'string') {
    const ta = PLACEMENT_TIME_ORDER.indexOf(a);
    const tb = PLACEMENT_TIME_ORDER.indexOf(b);
    if (ta >= 0 && tb >= 0 && ta !== tb) return ta - tb;
  }
  const pa = axisPosition(axes, name, a);
  const pb = axisPosition(axes, name, b);
  if (pa !== pb) return pa < pb ? -1 : 1;
  const ka = valueKey(a);
  const kb = valueKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/**
 * Cells compared axis by axis (axis names sorted, as labels name them), each by
 * `compareAxisValues`; a missing or null value sorts first.
 */
export function compareCells(axes: readonly Axis[], a: Cell, b: Cell): number {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  for (const k of keys) {
    const va = a[k] ?? null;
    const vb = b[k] ?? null;
    if (va === null || vb === null) {
      if (va !== vb) return va === null ? -1 : 1;
      continue;
    }
    const c = compareAxisValues(axes, k, va, vb);
    if (c !== 0) return c;
  }
  return 0;
}

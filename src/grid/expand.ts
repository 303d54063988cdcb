import { quoteValue, UserInputError, UserInputErrors } from '../errors.js';
import { AXIS_DEFAULTS, normaliseAxisValue, type AxisContext } from './axes.js';
import { checkCellCount, maxCells, tooManyCells, type AnyValue, type Assignment, type Factor } from './cell-count.js';
import { formatPath, type GridPath } from './source.js';
import { AXES, type AxisName, type Cell, type CellValues, type GridDocument, type NormalisedAxes } from './types.js';

/**
 * Expansion: the cartesian product of the axes, with `zip` groups varying together, `exclude`
 * removing cells that match a partial assignment, and `include` adding cells (unassigned axes take
 * their first listed value). Pure: the same grid always gives the same cells in the same order.
 */
export interface Expansion {
  axes: NormalisedAxes;
  /** Axes the grid writes (in `axes` or an include). */
  named: AxisName[];
  cells: Cell[];
}

function inputError(ctx: AxisContext, path: GridPath, message: string): UserInputError {
  return new UserInputError(message, {
    location: ctx.source.locate(path),
    field: formatPath(path),
    code: 'E_GRID_EXPAND',
  });
}

/** Input errors gathered across a pass, so a grid with several mistakes reports them all at once. */
class Collector {
  readonly errors: UserInputError[] = [];

  /** Run `fn`; a user input error is kept and `undefined` returned. */
  try<T>(fn: () => T): T | undefined {
    try {
      return fn();
    } catch (error) {
      if (error instanceof UserInputError) this.errors.push(error);
      else if (error instanceof UserInputErrors) this.errors.push(...error.errors);
      else throw error;
      return undefined;
    }
  }
}

export function expandGrid(doc: GridDocument, ctx: AxisContext, limit = maxCells()): Expansion {
  const found = new Collector();
  if ((doc.include?.length ?? 0) > limit) checkCellCount([], [], doc.include?.length ?? 0, limit, ctx);
  const axes = normaliseAxes(doc, ctx, found);
  const includes = assignments(doc.include, 'include', ctx, found);
  const excludes = assignments(doc.exclude, 'exclude', ctx, found);
  checkExcludes(excludes, axes, ctx, found.errors);
  checkLabels(axes, includes, ctx, found.errors);
  const factors = zipFactors(doc, axes, ctx, found.errors);
  if (found.errors.length > 0) throw new UserInputErrors(found.errors);
  checkCellCount(factors, excludes, includes.length, limit, ctx);

  const named = AXES.filter((a) => doc.axes[a] !== undefined || includes.some((e) => e[a] !== undefined));
  const cells = buildCells(factors, excludes, includes, axes, limit);
  if (cells.length > limit) throw tooManyCells(limit, factors, excludes.length, includes.length, ctx);
  if (cells.length === 0) {
    throw new UserInputError(
      'the grid expands to no cells: every cell is excluded; remove an exclude entry or add an include',
      {
        location: ctx.source.locate(['exclude']),
        field: 'exclude',
        code: 'E_GRID_EMPTY',
      },
    );
  }
  nameCells(cells, named);
  return { axes: axes as unknown as NormalisedAxes, named, cells };
}

/** Each axis's values as written (or its default), normalised; a value listed twice is an error. */
function normaliseAxes(doc: GridDocument, ctx: AxisContext, found: Collector): Record<AxisName, AnyValue[]> {
  const axes = {} as Record<AxisName, AnyValue[]>;
  for (const axis of AXES) {
    const written = doc.axes[axis];
    const raws = written ?? [AXIS_DEFAULTS[axis as Exclude<AxisName, 'visibility' | 'dose'>]];
    const values: AnyValue[] = [];
    raws.forEach((raw, i) => {
      const path: GridPath = written ? ['axes', axis, i] : ['axes'];
      const v = found.try(() => normaliseAxisValue(axis, raw, path, ctx) as AnyValue);
      if (!v) return;
      const same = values.findIndex((w) => w.key === v.key);
      if (same >= 0) {
        found.errors.push(
          inputError(ctx, path, `${quoteValue(raw)} repeats item ${same} of the ${axis} axis; list each value once`),
        );
        return;
      }
      values.push(v);
    });
    axes[axis] = values;
  }
  return axes;
}

/** `include` or `exclude` entries as partial assignments of normalised values. */
function assignments(
  list: GridDocument['include'],
  name: 'include' | 'exclude',
  ctx: AxisContext,
  found: Collector,
): Assignment[] {
  return (list ?? []).map((entry, i) => {
    const out: Assignment = {};
    for (const axis of AXES) {
      if (!(axis in entry)) continue;
      const v = found.try(() => normaliseAxisValue(axis, entry[axis], [name, i, axis], ctx) as AnyValue);
      if (v) out[axis] = v;
    }
    return out;
  });
}

/** An exclude that names a value no axis lists is a typo, not a no-op. */
function checkExcludes(
  excludes: Assignment[],
  axes: Record<AxisName, AnyValue[]>,
  ctx: AxisContext,
  errors: UserInputError[],
): void {
  excludes.forEach((entry, i) => {
    for (const [axis, v] of Object.entries(entry) as [AxisName, AnyValue][]) {
      if (!axes[axis].some((w) => w.key === v.key)) {
        errors.push(
          inputError(
            ctx,
            ['exclude', i, axis],
            `${JSON.stringify(v.label)} is not a value of the ${axis} axis; values: ${axes[axis].map((w) => w.label).join(', ')}`,
          ),
        );
      }
    }
  });
}

/** A label must name one value everywhere, or cell ids would be ambiguous. */
function checkLabels(
  axes: Record<AxisName, AnyValue[]>,
  includes: Assignment[],
  ctx: AxisContext,
  errors: UserInputError[],
): void {
  for (const axis of AXES) {
    const byLabel = new Map<string, AnyValue>();
    for (const v of [...axes[axis], ...includes.map((e) => e[axis]).filter((v): v is AnyValue => v !== undefined)]) {
      const seen = byLabel.get(v.label);
      if (seen && seen.key !== v.key) {
        errors.push(
          inputError(
            ctx,
            v.path,
            `label ${JSON.stringify(v.label)} already names a different ${axis} value (at ${formatPath(seen.path)}); give one of them a distinct name`,
          ),
        );
      } else byLabel.set(v.label, v);
    }
  }
}

/**
 * The product minus excluded cells, then the included cells (unassigned axes take their first
 * value); duplicates once. Stops once past `limit` cells.
 */
function buildCells(
  factors: Factor[],
  excludes: Assignment[],
  includes: Assignment[],
  axes: Record<AxisName, AnyValue[]>,
  limit: number,
): Cell[] {
  const cells: Cell[] = [];
  const seen = new Set<string>();
  const add = (assignment: Record<AxisName, AnyValue>): void => {
    const cell = makeCell(assignment);
    const key = AXES.map((a) => cell.values[a]?.key ?? 'null').join('\u0000');
    if (seen.has(key)) return;
    seen.add(key);
    cells.push(cell);
  };
  for (const assignment of product(factors)) {
    if (cells.length > limit) return cells;
    if (
      excludes.some((ex) =>
        (Object.entries(ex) as [AxisName, AnyValue][]).every(([axis, v]) => assignment[axis].key === v.key),
      )
    )
      continue;
    add(assignment);
  }
  for (const entry of includes) {
    const assignment = {} as Record<AxisName, AnyValue>;
    for (const axis of AXES) assignment[axis] = entry[axis] ?? (axes[axis][0] as AnyValue);
    add(assignment);
  }
  return cells;
}

/**
 * Ids name the axes that vary across the cells (all written axes when nothing varies), so an id
 * reads as what distinguishes the run: visibility=redacted,dose=8.
 */
function nameCells(cells: Cell[], named: AxisName[]): void {
  const varying = AXES.filter(
    (a) =>
      new Set(
        cells
          .map((c) => c.labels[a])
          .filter((l) => l !== null)
          .map(String),
      ).size > 1,
  );
  for (const cell of cells) {
    const id = (varying.length > 0 ? varying : named)
      .filter((axis) => cell.labels[axis] !== null)
      .map((axis) => `${axis}=${String(cell.labels[axis])}`)
      .join(',');
    cell.id = id === '' ? 'default' : id;
  }
}

function zipFactors(
  doc: GridDocument,
  axes: Record<AxisName, AnyValue[]>,
  ctx: AxisContext,
  errors: UserInputError[],
): Factor[] {
  const grouped = new Map<AxisName, number>();
  const groups: AxisName[][] = [];
  (doc.zip ?? []).forEach((group, g) => {
    let ok = true;
    group.forEach((axis, j) => {
      if (doc.axes[axis] === undefined) {
        errors.push(
          inputError(
            ctx,
            ['zip', g, j],
            `axis ${JSON.stringify(axis)} is not listed under axes; zip only axes the grid lists`,
          ),
        );
        ok = false;
      } else if (grouped.has(axis)) {
        errors.push(
          inputError(
            ctx,
            ['zip', g, j],
            `axis ${JSON.stringify(axis)} is already zipped in group ${grouped.get(axis)}; an axis can be in one group`,
          ),
        );
        ok = false;
      } else grouped.set(axis, g);
    });
    const lengths = group.map((a) => doc.axes[a]?.length ?? 0);
    if (ok && new Set(lengths).size > 1) {
      errors.push(
        inputError(
          ctx,
          ['zip', g],
          `zipped axes need lists of equal length; got ${group.map((a, j) => `${a}: ${lengths[j]}`).join(', ')}`,
        ),
      );
      ok = false;
    }
    if (ok) groups.push(group);
  });
  const factors: Factor[] = [];
  for (const axis of AXES) {
    const g = grouped.get(axis);
    if (g === undefined) {
      factors.push({ axes: [axis], rows: axes[axis].map((v) => [v]) });
      continue;
    }
    const group = AXES.filter((a) => grouped.get(a) === g);
    // The group enters the product once, where its first axis (in canonical order) would.
    if (group[0] !== axis || !groups.some((gr) => gr === doc.zip?.[g])) continue;
    const length = axes[axis].length;
    factors.push({ axes: group, rows: Array.from({ length }, (_, i) => group.map((a) => axes[a][i] as AnyValue)) });
  }
  return factors;
}

function* product(factors: Factor[]): Generator<Record<AxisName, AnyValue>> {
  const counters = factors.map(() => 0);
  if (factors.some((f) => f.rows.length === 0)) return;
  for (;;) {
    const assignment = {} as Record<AxisName, AnyValue>;
    factors.forEach((f, i) => {
      const row = f.rows[counters[i] as number] as AnyValue[];
      f.axes.forEach((axis, j) => {
        assignment[axis] = row[j] as AnyValue;
      });
    });
    yield assignment;
    let i = factors.length - 1;
    while (i >= 0) {
      counters[i] = (counters[i] as number) + 1;
      if ((counters[i] as number) < (factors[i] as Factor).rows.length) break;
      counters[i] = 0;
      i -= 1;
    }
    if (i < 0) return;
  }
}

function makeCell(assignment: Record<AxisName, AnyValue>): Cell {
  const noCanaries = (assignment.population.value as { kind: string }).kind === 'none';
  const values = { ...assignment } as unknown as CellValues;
  if (noCanaries) {
    values.dose = null;
    values.placement = null;
  }
  const labels = {} as Record<AxisName, string | number | null>;
  for (const axis of AXES) {
    const v = values[axis] as AnyValue | null;
    labels[axis] = v === null ? null : axis === 'dose' || axis === 'seed' ? (v.value as number) : v.label;
  }
  return { id: '', values, labels };
}

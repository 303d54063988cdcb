import { UserInputError } from '../errors.js';
import type { AxisContext } from './axes.js';
import type { AxisName, AxisValue } from './types.js';

/**
 * How many cells a grid makes, counted before any cell is built, so a grid of a million cells is
 * refused in milliseconds instead of exhausting memory. The limit (default DEFAULT_MAX_CELLS) is
 * raised with CANARY_AUDIT_MAX_CELLS; every cell is a fine-tuning run, so it is rarely wanted.
 */
export const DEFAULT_MAX_CELLS = 10_000;
/** Past this many product cells the excludes are not walked one by one, whatever they remove. */
const MAX_WALK_FACTOR = 100;

export type AnyValue = AxisValue<unknown>;
export type Assignment = Partial<Record<AxisName, AnyValue>>;
/** A factor is one axis, or a zip group whose axes advance together. */
export type Factor = { axes: AxisName[]; rows: AnyValue[][] };

export function maxCells(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.CANARY_AUDIT_MAX_CELLS;
  if (raw === undefined || raw === '') return DEFAULT_MAX_CELLS;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new UserInputError(`CANARY_AUDIT_MAX_CELLS must be an integer >= 1, got ${JSON.stringify(raw)}`, {
      field: 'CANARY_AUDIT_MAX_CELLS',
      code: 'E_BAD_ENV',
    });
  }
  return n;
}

/**
 * Refuse a grid that certainly makes more than `limit` cells (the product minus everything the
 * excludes could remove, plus the includes), or whose product is too large to walk. A grid between
 * the bounds is expanded with `limit` as a stop (see tooManyCells).
 */
export function checkCellCount(
  factors: Factor[],
  excludes: Assignment[],
  includes: number,
  limit: number,
  ctx: AxisContext,
): void {
  const product = factors.reduce((n, f) => n * f.rows.length, 1);
  const excluded = excludes.reduce((n, ex) => n + matching(factors, ex), 0);
  const atLeast = Math.max(0, product - excluded);
  if (atLeast > limit || includes > limit) {
    throw tooMany(
      `${fmt(Math.max(atLeast, includes))} cells (${describe(factors, excludes.length, includes)})`,
      limit,
      ctx,
    );
  }
  if (product > limit * MAX_WALK_FACTOR) {
    throw tooMany(
      `up to ${fmt(product)} cells before its excludes (${describe(factors, excludes.length, includes)})`,
      limit,
      ctx,
    );
  }
}

/** The error for a grid found to pass the limit while its cells were built. */
export function tooManyCells(
  limit: number,
  factors: Factor[],
  excludes: number,
  includes: number,
  ctx: AxisContext,
): UserInputError {
  return tooMany(`more than ${fmt(limit)} cells (${describe(factors, excludes, includes)})`, limit, ctx);
}

/** Product cells an exclude removes: per factor, the rows that agree with it. */
function matching(factors: Factor[], exclude: Assignment): number {
  return factors.reduce(
    (n, f) =>
      n *
      f.rows.filter((row) =>
        f.axes.every((axis, j) => exclude[axis] === undefined || exclude[axis]?.key === row[j]?.key),
      ).length,
    1,
  );
}

function describe(factors: Factor[], excludes: number, includes: number): string {
  const sizes = factors.filter((f) => f.rows.length > 1).map((f) => `${f.axes.join('+')} ${f.rows.length}`);
  const parts = [sizes.length > 0 ? sizes.join(' x ') : 'one product cell'];
  if (excludes > 0) parts.push(`${excludes} exclude${excludes === 1 ? '' : 's'}`);
  if (includes > 0) parts.push(`${fmt(includes)} include${includes === 1 ? '' : 's'}`);
  return parts.join(', ');
}

function tooMany(what: string, limit: number, ctx: AxisContext): UserInputError {
  return new UserInputError(
    `the grid makes ${what}, more than the limit of ${fmt(limit)} runs; shrink an axis, or raise the limit with CANARY_AUDIT_MAX_CELLS`,
    { location: ctx.source.locate(['axes']), field: 'axes', code: 'E_GRID_TOO_LARGE' },
  );
}

const fmt = (n: number) => n.toLocaleString('en-US');

import { resolve } from 'node:path';
import { formatLocation, UserInputError, UserInputErrors } from '../errors.js';
import { codeSpaceOf, loadGrid, parseGrid, type LoadedGrid } from '../grid/index.js';
import { controllerStamp, type Stamp } from '../provenance/index.js';
import { CanaryPool } from './canaries.js';
import { checkTinyLengths } from './length-check.js';
import { CellPlanError, layoutRun, resolveCellPopulation, type RunLayout } from './plan-run.js';

/**
 * An audit planned in memory: the grid, its canary pool and one layout per cell (canaries and
 * their exact rows). Rows themselves are not held: `writeAudit` streams them run by run, so
 * memory stays bounded by one run's positions however many rows or runs the grid has.
 */
export interface AuditPlan {
  /** "audit-" + the first 12 hex digits of the normalised grid's sha256. */
  auditId: string;
  name: string;
  /** Absolute path of the grid file. */
  gridFile: string;
  /** The grid exactly as submitted (stored as grid.yaml). */
  gridText: string;
  grid: LoadedGrid;
  pool: CanaryPool;
  runs: RunLayout[];
  /** Controller stamp when planning started (provenance.at_start of every manifest). */
  startStamp: Stamp;
}

export interface PlanOptions {
  /** Accepted for symmetry with writeAudit; planning itself writes nothing. */
  artifactsDir?: string;
}

/** Load, validate and expand a grid, draw its canaries and place them. Throws UserInputError(s). */
export async function planAudit(gridPath: string, _options: PlanOptions = {}): Promise<AuditPlan> {
  const startStamp = controllerStamp();
  const grid = await loadGrid(gridPath);
  return planFromGrid(grid, grid.source.text, resolve(gridPath), startStamp);
}

/** Plan from grid text already in memory (tests, tools); `file` names it in errors. */
export function planAuditText(file: string, text: string, startStamp: Stamp = controllerStamp()): AuditPlan {
  return planFromGrid(parseGrid(file, text), text, resolve(file), startStamp);
}

function planFromGrid(grid: LoadedGrid, gridText: string, gridFile: string, startStamp: Stamp): AuditPlan {
  const { doc } = grid;
  // The pool holds, per auxiliary cohort index, as many canaries as the largest cell asks for.
  const aux: number[] = [];
  for (const cell of grid.expansion.cells) {
    for (const c of resolveCellPopulation(grid, cell).aux) aux[c.index] = Math.max(aux[c.index] ?? 0, c.count);
  }
  let pool: CanaryPool;
  try {
    pool = new CanaryPool(doc.seed, codeSpaceOf(doc), { focal: doc.canaries.focal, heldOut: doc.canaries.held_out, aux: Array.from(aux, (n) => n ?? 0) }, doc.candidates.kind === 'sampled' ? doc.candidates.decoys : undefined);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    throw new UserInputError(`${error.message}; use fewer canaries or a longer code`, {
      location: grid.source.locate(['canaries']),
      field: 'canaries',
      code: 'E_CANARIES',
    });
  }
  const errors: UserInputError[] = [];
  const runs: RunLayout[] = [];
  for (const cell of grid.expansion.cells) {
    try {
      runs.push(layoutRun(grid, pool, cell));
    } catch (error) {
      if (error instanceof UserInputError) errors.push(error);
      else throw error;
    }
  }
  errors.push(...checkTinyLengths(grid, pool, runs));
  if (errors.length > 0) throw new UserInputErrors(mergeCellErrors(errors));
  return { auditId: `audit-${grid.sha256.slice(0, 12)}`, name: doc.name, gridFile, gridText, grid, pool, runs, startStamp };
}

/** The same reason at the same grid value in many cells: one line that counts and names a few. */
function mergeCellErrors(errors: UserInputError[]): UserInputError[] {
  const groups = new Map<string, CellPlanError[]>();
  const lines: (UserInputError | CellPlanError[])[] = [];
  for (const e of errors) {
    if (!(e instanceof CellPlanError)) {
      lines.push(e);
      continue;
    }
    const key = `${formatLocation(e.details.location)}|${e.details.field}|${e.reason}`;
    const group = groups.get(key);
    if (group) group.push(e);
    else {
      const fresh = [e];
      groups.set(key, fresh);
      lines.push(fresh);
    }
  }
  return lines.map((line) => {
    if (!Array.isArray(line)) return line;
    const [first] = line as [CellPlanError];
    if (line.length === 1) return first;
    const named = line.slice(0, 3).map((c) => c.cellId).join('; ');
    return new UserInputError(`${line.length} cells (${named}${line.length > 3 ? '; ...' : ''}): ${first.reason}`, first.details);
  });
}

import { quoteValue, UserInputError, type SourceLocation } from '../errors.js';
import {
  formatPath,
  replicateKey,
  type Cell,
  type LoadedGrid,
  type PlacementValue,
  type Window,
} from '../grid/index.js';
import { randomizedInclusion, type CanaryPool, type PoolCanary } from './canaries.js';
import { InfeasiblePlacement, placeCohort, SlotBoard, updateRange, type CohortRequest } from './placement.js';
import { resolvePopulation, type ResolvedCohort, type ResolvedPopulation } from './population.js';
import { Rng } from '../random.js';
import type { Task } from './tasks/index.js';
import type { DesignSecrets } from './designs.js';
import type { TogetherRun } from './designs-together.js';

/** One inserted canary of a run, with its exact rows. */
export interface PlacedCanary {
  canary: PoolCanary;
  /** `focal` or the auxiliary cohort's name. */
  cohort: string;
  dose: number;
  /** The window its appearances were drawn from, as fractions of the run. */
  window: Window;
  /** Row indices, ascending; length === dose. */
  positions: number[];
}

export interface RunStats {
  rows: number;
  updates: number;
  batchSize: number;
  /** Canary rows per dose (focal and auxiliary together). */
  appearancesByDose: Record<string, number>;
  canaryRows: number;
  /** canaryRows / rows. */
  canaryFraction: number;
}

/** A run before its rows exist: the cell, its canaries with positions, its controls. */
export interface RunLayout {
  cell: Cell;
  /** The generator of the cell's task value: the plan's one instance (`AuditPlan.tasks`), shared by every run of that value. */
  task: Task;
  canaries: PlacedCanary[];
  /** Never inserted in this run: the grid's held-out canaries, plus the focal ones in a no-canary run. */
  heldOut: PoolCanary[];
  stats: RunStats;
  /** A non-codes canary design (the `design` axis): its secret space and decoys; absent: the grid's codes. */
  secrets?: DesignSecrets;
  /** Several designs' canaries in this run (`canaries.designs: together`); absent: one design. */
  together?: TogetherRun;
}

export function resolveCellPopulation(grid: LoadedGrid, cell: Cell): ResolvedPopulation {
  const doses = grid.expansion.axes.dose.map((v) => v.value);
  return resolvePopulation(cell.values.population.value, cell.values.dose?.value ?? null, doses, focalCount(grid));
}

/** Canaries inserted as focal: the grid's `focal`, or the heads of a randomized-inclusion draw. */
export function focalCount(grid: LoadedGrid): number {
  const c = grid.doc.canaries;
  return c.inclusion === 'randomized'
    ? randomizedInclusion(grid.doc.seed, c.focal, c.held_out).filter(Boolean).length
    : c.focal;
}

/**
 * Lay out one run. Focal positions depend only on (grid seed, placement, dose, budget, batch) and
 * are drawn first on an empty board, so cells that differ in visibility, schedule, model, task,
 * seed — or population — put every focal canary on the same rows. Auxiliary cohorts then take
 * free rows, from a stream that also depends on the population. With joint seeds
 * (`replicates: {vary: joint}`) both streams also take the cell's seed: each seed its own rows.
 */
export function layoutRun(grid: LoadedGrid, pool: CanaryPool, cell: Cell, task: Task): RunLayout {
  const { rows, updates } = grid;
  const batch = grid.doc.training.batch_size;
  const seed = grid.doc.seed;
  const population = resolveCellPopulation(grid, cell);
  const board = new SlotBoard(updates, batch);
  const canaries: PlacedCanary[] = [];
  const heldOut = population.focal ? [...pool.heldOut] : [...pool.focal, ...pool.heldOut];

  try {
    if (population.focal) {
      const dose = cell.values.dose?.value as number;
      const placement = cell.values.placement as { label: string; key: string; value: PlacementValue };
      if (cell.values.population.value.kind === 'mixed-dose' && population.aux.length === 0) {
        throw new InfeasiblePlacement(
          `mixed-dose adds no companions: its only dose is the cell's own (${dose}); list other doses, e.g. {kind: mixed-dose, doses: [16]}`,
          'population',
        );
      }
      const appearances = pool.focal.length * dose + population.aux.reduce((n, c) => n + c.count * c.dose, 0);
      if (appearances > rows) {
        throw new InfeasiblePlacement(
          `canary appearances (${appearances}) exceed the row budget (${rows} rows); lower the doses or counts, or train more rows`,
          'dose',
        );
      }
      const p = placement.value;
      const range = updateRange(p.window, updates);
      const focalRequest: CohortRequest = {
        count: pool.focal.length,
        dose,
        range,
        spacing: p.spacing,
        final: p.final ? updateRange(p.final, updates) : null,
        describe: `placement ${placement.label} (updates ${range[0]}-${range[1] - 1} of ${updates})`,
      };
      // Joint seeds: each seed value draws its own placement (nothing is added otherwise).
      const replicate = replicateKey(grid, cell.values.seed.value);
      const rng = new Rng(
        seed,
        'placement',
        'focal',
        placement.key,
        dose,
        rows,
        batch,
        pool.focal.length,
        ...replicate,
      );
      placeCohort(board, rng, focalRequest).forEach((positions, j) => {
        canaries.push({ canary: pool.focal[j] as PoolCanary, cohort: 'focal', dose, window: [...p.window], positions });
      });
      const focalUpdates = canaries.flatMap((c) => c.positions.map((r) => Math.floor(r / batch)));
      const first = Math.min(...focalUpdates);
      const last = Math.max(...focalUpdates);
      for (const cohort of population.aux) {
        const request = auxRequest(cohort, p, placement.label, updates, first, last);
        const auxRng = new Rng(
          seed,
          'placement',
          'aux',
          cell.values.population.key,
          placement.key,
          dose,
          rows,
          batch,
          cohort.index,
          ...replicate,
        );
        const members = (pool.aux[cohort.index] ?? []).slice(0, cohort.count);
        let placed: number[][];
        try {
          placed = placeCohort(board, auxRng, request);
        } catch (error) {
          // Whatever fails in an auxiliary cohort is a property of the population value.
          if (error instanceof InfeasiblePlacement) throw new InfeasiblePlacement(error.message, 'population');
          throw error;
        }
        placed.forEach((positions, j) => {
          canaries.push({
            canary: members[j] as PoolCanary,
            cohort: cohort.name,
            dose: cohort.dose,
            window: [request.range[0] / updates, request.range[1] / updates],
            positions,
          });
        });
      }
    }
  } catch (error) {
    if (!(error instanceof InfeasiblePlacement)) throw error;
    const value = cell.values[error.axis] ?? cell.values.population;
    throw new CellPlanError(cell.id, error.message, {
      location: grid.source.locate(value.path),
      field: formatPath(value.path),
      code: 'E_PLACEMENT',
    });
  }
  return { cell, task, canaries, heldOut, stats: runStats(canaries, rows, updates, batch) };
}

/** A cell that cannot be laid out; plan.ts reports the same reason across cells once. */
export class CellPlanError extends UserInputError {
  constructor(
    readonly cellId: string,
    readonly reason: string,
    readonly details: { location: SourceLocation; field: string; code: string },
  ) {
    super(`cell ${cellId}: ${reason}`, details);
  }
}

function auxRequest(
  cohort: ResolvedCohort,
  p: PlacementValue,
  label: string,
  updates: number,
  first: number,
  last: number,
): CohortRequest {
  const what = `cohort ${cohort.name}`;
  if (cohort.order === 'with') {
    const window = cohort.window ?? p.window;
    const range = updateRange(window, updates);
    return {
      count: cohort.count,
      dose: cohort.dose,
      range,
      spacing: cohort.spacing ?? p.spacing,
      final: cohort.window === null && p.final ? updateRange(p.final, updates) : null,
      describe: `${what} window ${cohort.window ? quoteValue(cohort.window) : label} (updates ${range[0]}-${range[1] - 1})`,
    };
  }
  // before / after: strictly outside the focal cohort's span, optionally narrowed by a window.
  const own = cohort.window ? updateRange(cohort.window, updates) : ([0, updates] as [number, number]);
  const range: [number, number] =
    cohort.order === 'before' ? [own[0], Math.min(own[1], first)] : [Math.max(own[0], last + 1), own[1]];
  return {
    count: cohort.count,
    dose: cohort.dose,
    range: [range[0], Math.max(range[0], range[1])],
    spacing: cohort.spacing,
    final: null,
    describe: `${what} ${cohort.order} the focal canaries (updates ${range[0]}-${range[1] - 1}; focal span ${first}-${last})`,
  };
}

function runStats(canaries: PlacedCanary[], rows: number, updates: number, batchSize: number): RunStats {
  const appearancesByDose: Record<string, number> = {};
  let canaryRows = 0;
  for (const c of canaries) {
    appearancesByDose[String(c.dose)] = (appearancesByDose[String(c.dose)] ?? 0) + c.positions.length;
    canaryRows += c.positions.length;
  }
  return { rows, updates, batchSize, appearancesByDose, canaryRows, canaryFraction: canaryRows / rows };
}

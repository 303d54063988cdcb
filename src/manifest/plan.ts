import { resolve } from 'node:path';
import { formatLocation, UserInputError, UserInputErrors } from '../errors.js';
import { messageText, type TaskData } from '../contracts/index.js';
import {
  codeSpaceOf,
  formatPath,
  loadGrid,
  parseGrid,
  type AxisValue,
  type Cell,
  type DesignValue,
  type LoadedGrid,
  type ModelValue,
} from '../grid/index.js';
import { codesIn } from '../codes/index.js';
import {
  createTask,
  taskDataRequest,
  TaskSpecError,
  utilityDataRequest,
  type Task,
  type TaskDataRequest,
  type TaskSpec,
} from './tasks/index.js';
import { controllerStamp, type Stamp } from '../provenance/index.js';
import { CanaryPool, randomizedInclusion } from './canaries.js';
import { checkTinyLengths } from './length-check.js';
import { CellPlanError, layoutRun, resolveCellPopulation, type RunLayout } from './plan-run.js';
import { DesignPools, designModelProblem } from './designs.js';
import { togetherLayout } from './together-layout.js';
import { type BpeTokenizer, RareTokenPoolError } from './hf-rare-tokens.js';

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
  /**
   * The generator of each task value, by value key: made once when planning (a dataset-backed task
   * renders its rows once) and shared by every run of that value (`RunLayout.task`).
   */
  tasks: ReadonlyMap<string, Task>;
  runs: RunLayout[];
  /** Controller stamp when planning started (provenance.at_start of every manifest). */
  startStamp: Stamp;
}

/**
 * Loads the rows of a dataset-backed task value (the app layer reads files and the Hub). Errors
 * it throws as TaskDataError name the key of the task value to fix; others pass through.
 */
export type TaskDataLoader = (request: TaskDataRequest, spec: TaskSpec) => Promise<TaskData>;

export class TaskDataError extends Error {
  constructor(
    message: string,
    /** Key path inside the task value, e.g. ['source', 'revision']. */
    readonly field: (string | number)[],
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TaskDataError';
  }
}

export interface PlanOptions {
  /** Accepted for symmetry with writeAudit; planning itself writes nothing. */
  artifactsDir?: string;
  /** Needed only by grids with dataset-backed tasks. */
  loadTaskData?: TaskDataLoader;
  /** Needed only by grids with design rare-tokens on hf models: the model's own tokenizer. */
  loadTokenizer?: TokenizerLoader;
}

/**
 * Reads an hf model's tokenizer (the app layer reads the Hub cache or a local folder). Errors it
 * throws as RangeError are reported at the model's place in the grid.
 */
export type TokenizerLoader = (model: ModelValue) => Promise<BpeTokenizer>;

/** The tokenizers of the hf models that a rare-tokens cell uses, by model key. */
async function designTokenizers(
  grid: LoadedGrid,
  load: TokenizerLoader | undefined,
): Promise<Map<string, BpeTokenizer>> {
  const out = new Map<string, BpeTokenizer>();
  if (!load) return out;
  const errors: UserInputError[] = [];
  const tried = new Set<string>();
  for (const cell of grid.expansion.cells) {
    const model = cell.values.model;
    const rare = (cell.designs ?? [cell.values.design]).some((d) => d.value.kind === 'rare-tokens');
    if (!rare || model.value.backend !== 'hf' || tried.has(model.key)) continue;
    tried.add(model.key);
    try {
      out.set(model.key, await load(model.value));
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      errors.push(
        new UserInputError(`model ${model.label}: design rare-tokens reads its tokenizer: ${error.message}`, {
          location: grid.source.locate(model.path),
          field: formatPath(model.path),
          code: 'E_TOKENIZER',
        }),
      );
    }
  }
  if (errors.length > 0) throw new UserInputErrors(errors);
  return out;
}

/** Load, validate and expand a grid, draw its canaries and place them. Throws UserInputError(s). */
export async function planAudit(gridPath: string, options: PlanOptions = {}): Promise<AuditPlan> {
  const startStamp = controllerStamp();
  const grid = await withTaskData(await loadGrid(gridPath), options.loadTaskData);
  const tokenizers = await designTokenizers(grid, options.loadTokenizer);
  return planFromGrid(grid, grid.source.text, resolve(gridPath), startStamp, tokenizers);
}

/** Plan from grid text already in memory (tests, tools); `file` names it in errors. */
export function planAuditText(
  file: string,
  text: string,
  startStamp: Stamp = controllerStamp(),
  taskData?: ReadonlyMap<string, TaskData>,
): AuditPlan {
  const grid = parseGrid(file, text);
  return planFromGrid(taskData ? { ...grid, taskData } : grid, text, resolve(file), startStamp);
}

/** planAuditText for grids with dataset-backed tasks: loads their rows first. */
export async function planAuditTextWithData(
  file: string,
  text: string,
  loadTaskData: TaskDataLoader,
): Promise<AuditPlan> {
  const startStamp = controllerStamp();
  const grid = await withTaskData(parseGrid(file, text), loadTaskData);
  return planFromGrid(grid, text, resolve(file), startStamp);
}

/** The grid with the rows of each dataset-backed task value loaded (once per distinct value). */
async function withTaskData(grid: LoadedGrid, load: TaskDataLoader | undefined): Promise<LoadedGrid> {
  const taskData = new Map<string, TaskData>();
  const utilityData = new Map<string, TaskData>();
  const errors: UserInputError[] = [];
  for (const value of grid.expansion.axes.task) {
    const at = (field: (string | number)[], message: string, code: string, cause?: unknown): UserInputError => {
      const path = [...value.path, ...field];
      return new UserInputError(`task ${value.label}: ${message}`, {
        location: grid.source.locate(path),
        field: formatPath(path),
        code,
        cause,
      });
    };
    const requests: { request: TaskDataRequest; into: Map<string, TaskData>; under: string[] }[] = [];
    try {
      const request = taskDataRequest(value.value);
      if (request) requests.push({ request, into: taskData, under: [] });
      const utility = utilityDataRequest(value.value);
      if (utility) requests.push({ request: utility, into: utilityData, under: ['utility'] });
    } catch (error) {
      if (!(error instanceof TaskSpecError)) throw error;
      errors.push(at(error.field, error.message, 'E_TASK'));
      continue;
    }
    for (const { request, into, under } of requests) {
      if (!load) {
        errors.push(
          at(
            [...under, 'source'],
            'this task reads a dataset; plan it with canary-audit plan (the CLI loads datasets)',
            'E_TASK',
          ),
        );
        continue;
      }
      try {
        into.set(value.key, await load(request, value.value));
      } catch (error) {
        if (!(error instanceof TaskDataError)) throw error;
        // `datasets fetch REPO` fetches the splits only; a task that reads images by path needs them too.
        const also =
          error.code === 'E_DATASET_NOT_CACHED' && request.assets
            ? `; this task reads ${request.assets.join(', ')} too, which canary-audit datasets fetch ${grid.source.file} fetches with the splits`
            : '';
        errors.push(at([...under, ...error.field], `${error.message}${also}`, error.code, error));
      }
    }
  }
  if (errors.length > 0) throw new UserInputErrors(errors);
  if (taskData.size === 0 && utilityData.size === 0) return grid;
  return { ...grid, ...(taskData.size > 0 ? { taskData } : {}), ...(utilityData.size > 0 ? { utilityData } : {}) };
}

/** Make each task value's generator once, so a wrong template or row is reported at its value. */
function makeTasks(grid: LoadedGrid): { tasks: Map<string, Task>; errors: UserInputError[] } {
  const tasks = new Map<string, Task>();
  const errors: UserInputError[] = [];
  for (const value of grid.expansion.axes.task) {
    try {
      tasks.set(value.key, createTask(value.value, grid.taskData?.get(value.key), grid.utilityData?.get(value.key)));
    } catch (error) {
      if (!(error instanceof TaskSpecError)) throw error;
      const path = [...value.path, ...error.field];
      errors.push(
        new UserInputError(`task ${value.label}: ${error.message}`, {
          location: grid.source.locate(path),
          field: formatPath(path),
          code: 'E_TASK',
        }),
      );
    }
  }
  return { tasks, errors };
}

/** The plan's generator of one task value (made by `makeTasks`; every value of the grid has one). */
export function planTask(plan: Pick<AuditPlan, 'tasks'>, value: { key: string; label: string }): Task {
  const task = plan.tasks.get(value.key);
  if (!task) throw new Error(`internal: the plan has no generator for task ${value.label}`);
  return task;
}

/** Codes that occur in the rows of the grid's dataset-backed tasks (empty for generated tasks). */
function datasetCodes(grid: LoadedGrid, tasks: ReadonlyMap<string, Task>): Set<string> {
  const space = codeSpaceOf(grid.doc);
  const codes = new Set<string>();
  for (const value of grid.expansion.axes.task) {
    const task = planTask({ tasks }, value);
    for (const row of task.allRows?.() ?? []) {
      for (const m of row.prompt) codesIn(space, messageText(m), codes);
      codesIn(space, row.target, codes);
    }
  }
  return codes;
}

function planFromGrid(
  grid: LoadedGrid,
  gridText: string,
  gridFile: string,
  startStamp: Stamp,
  tokenizers: ReadonlyMap<string, BpeTokenizer> = new Map(),
): AuditPlan {
  const { doc } = grid;
  const { tasks, errors: taskErrors } = makeTasks(grid);
  if (taskErrors.length > 0) throw new UserInputErrors(taskErrors);
  // The pool holds, per auxiliary cohort index, as many canaries as the largest cell asks for.
  const aux: number[] = [];
  for (const cell of grid.expansion.cells) {
    for (const c of resolveCellPopulation(grid, cell).aux) aux[c.index] = Math.max(aux[c.index] ?? 0, c.count);
  }
  let pool: CanaryPool;
  try {
    const inclusion =
      doc.canaries.inclusion === 'randomized'
        ? randomizedInclusion(doc.seed, doc.canaries.focal, doc.canaries.held_out)
        : undefined;
    if (inclusion && (inclusion.every(Boolean) || !inclusion.some(Boolean)))
      throw new RangeError(`the randomized inclusion draw put all ${inclusion.length} canaries on one side`);
    pool = new CanaryPool(
      doc.seed,
      codeSpaceOf(doc),
      { focal: doc.canaries.focal, heldOut: doc.canaries.held_out, aux: Array.from(aux, (n) => n ?? 0) },
      doc.candidates.kind === 'sampled' ? doc.candidates.decoys : undefined,
      datasetCodes(grid, tasks),
      inclusion,
    );
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
  const designs = new DesignPools(pool, doc.seed);
  for (const cell of grid.expansion.cells) {
    try {
      const task = planTask({ tasks }, cell.values.task);
      if (cell.designs) {
        const made = (d: AxisValue<DesignValue>) => designOf(grid, cell, d, designs, task, tokenizers);
        runs.push(togetherLayout(grid, cell, cell.designs, pool, made, task));
        continue;
      }
      const design = designOf(grid, cell, cell.values.design, designs, task, tokenizers);
      const layout = layoutRun(grid, design?.pool ?? pool, cell, task);
      runs.push(design ? { ...layout, secrets: design.secrets } : layout);
    } catch (error) {
      if (error instanceof UserInputError) errors.push(error);
      else throw error;
    }
  }
  errors.push(...checkImageModels(grid, tasks));
  if (errors.length === 0) errors.push(...checkTinyLengths(grid, pool, runs));
  if (errors.length > 0) throw new UserInputErrors(mergeCellErrors(errors));
  return {
    auditId: `audit-${grid.sha256.slice(0, 12)}`,
    name: doc.name,
    gridFile,
    gridText,
    grid,
    pool,
    tasks,
    runs,
    startStamp,
  };
}

/** A non-codes canary design's pool and secrets for a cell, or null; a design its model or cue cannot take fails here. */
function designOf(
  grid: LoadedGrid,
  cell: Cell,
  design: AxisValue<DesignValue>,
  designs: DesignPools,
  task: Task,
  tokenizers: ReadonlyMap<string, BpeTokenizer>,
) {
  if (design.value.kind === 'codes') return null;
  const at = { location: grid.source.locate(design.path), field: formatPath(design.path), code: 'E_DESIGN' };
  const model = cell.values.model;
  const tokenizer = model.value.backend === 'hf' ? tokenizers.get(model.key) : undefined;
  const problem = designModelProblem(design.value, model.value, tokenizer);
  if (problem) throw new CellPlanError(cell.id, problem, at);
  const scheme = cell.values.visibility.value.scheme;
  if (scheme !== 'visible' && scheme !== 'redacted')
    throw new CellPlanError(
      cell.id,
      `design ${design.label} shows its secret visible or redacted; ${scheme} encodes the grid's code alphabet only; exclude these cells (exclude: [{visibility: ${scheme}, design: ${design.label}}])`,
      at,
    );
  try {
    return designs.get(
      design,
      task,
      cell.values.task.key,
      tokenizer ? { key: model.key, value: model.value, tokenizer } : undefined,
    );
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    const fix = error instanceof RareTokenPoolError ? '' : "; raise the design's pool or length, or use fewer canaries";
    throw new CellPlanError(cell.id, `${error.message}${fix}`, at);
  }
}

/** Image rows need a vision-language model: the tiny model without a vision stem reads characters only. */
function checkImageModels(grid: LoadedGrid, tasks: ReadonlyMap<string, Task>): UserInputError[] {
  return grid.expansion.cells.flatMap((cell) => {
    const task = planTask({ tasks }, cell.values.task);
    const model = cell.values.model;
    if (task.images === undefined || model.value.backend !== 'tiny' || model.value.tiny?.vision) return [];
    return [
      new CellPlanError(
        cell.id,
        `task ${cell.values.task.label} gives image rows but model ${model.label} reads text only; use the tiny-vlm preset (or vision: true on a tiny model) or a Hugging Face vision-language model (backend: hf, e.g. Qwen/Qwen2.5-VL-7B-Instruct)`,
        {
          location: grid.source.locate(model.path),
          field: formatPath(model.path),
          code: 'E_MODEL',
        },
      ),
    ];
  });
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
    const named = line
      .slice(0, 3)
      .map((c) => c.cellId)
      .join('; ');
    return new UserInputError(
      `${line.length} cells (${named}${line.length > 3 ? '; ...' : ''}): ${first.reason}`,
      first.details,
    );
  });
}

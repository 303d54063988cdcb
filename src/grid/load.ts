import type { TaskData } from '../contracts/index.js';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, extname, join, relative, resolve } from 'node:path';
import { CONFIGS_DIR } from '../paths.js';
import { UserInputError, UserInputErrors, firstControlCharacter, quoteValue } from '../errors.js';
import { contentHash } from '../hash.js';
import { codeSpaceOf } from './code-space.js';
import { cueEncoding } from '../codes/index.js';
import { validate } from '../schemas/index.js';
import type { AxisContext } from './axes.js';
import { maxCells } from './cell-count.js';
import { expandGrid, type Expansion } from './expand.js';
import { hfModelProblem, modelFromObject, modelProblem } from './models.js';
import { pretrainProblem } from './pretrain.js';
import { cellsUnderDesign, designProblems, replicationDesign, type ReplicationDesign } from './design.js';
import { designsTogether, togetherProblem } from './designs-together.js';
import { explainGridErrors } from './schema-errors.js';
import { formatPath, GridSource, type GridPath } from './source.js';
import type { GridDocument, ModelValue, VisibilityValue } from './types.js';

/** Largest exhaustive candidate space: the trainer stores one float32 per candidate per probe. */
export const MAX_EXHAUSTIVE = 1_000_000;

/** A grid read, validated (defaults applied) and expanded into cells. */
export interface LoadedGrid {
  file: string;
  source: GridSource;
  /** The validated document with defaults and the name filled in: what the audit id hashes. */
  doc: GridDocument & { name: string };
  /** sha256 of the normalised grid (canonical JSON); the audit id is its first 12 hex digits. */
  sha256: string;
  rows: number;
  updates: number;
  expansion: Expansion;
  /** What the seeds of a cell vary and what its intervals generalize over (src/grid/design.ts). */
  design: ReplicationDesign;
  /**
   * Rows of the dataset-backed task values, by the value's key: loaded by the app layer before
   * planning (planning itself never reads a dataset). Absent when the grid has no such task.
   */
  taskData?: ReadonlyMap<string, TaskData>;
  /** Rows of the task values' own utility sources (`utility: {source, ...}`), by the value's key. */
  utilityData?: ReadonlyMap<string, TaskData>;
}

/**
 * A grid is a hand-written file; one past this size would take the YAML parser longer than any
 * check after it (200,000 include lines: 10 s). Grows with CANARY_AUDIT_MAX_CELLS (100 bytes a cell).
 */
export function maxGridBytes(): number {
  return Math.max(1 << 20, maxCells() * 100);
}

/** Why a grid file could not be read, and what to do about it. */
export function gridReadReason(error: NodeJS.ErrnoException): string {
  const quickstart = join(CONFIGS_DIR, 'quickstart.yaml');
  const shown = relative(process.cwd(), quickstart);
  const example = shown !== '' && !shown.startsWith('..') ? shown : quickstart;
  const examples = `the examples are in ${dirname(example)}/ (e.g. ${example})`;
  switch (error.code) {
    case 'ENOENT':
      return `no such file (paths are relative to ${process.cwd()}); check the path, ${examples}`;
    case 'EISDIR':
      return `it is a folder; name a grid YAML file, ${examples}`;
    case 'EACCES':
    case 'EPERM':
      return 'permission denied; make the file readable by this user (chmod u+r) or copy it somewhere you can read';
    default:
      return `${error.message}; check that the path names a readable YAML file`;
  }
}

export async function loadGrid(file: string): Promise<LoadedGrid> {
  let text: string;
  try {
    const { size } = await stat(file);
    if (size > maxGridBytes()) {
      throw new UserInputError(
        `the grid file is ${size.toLocaleString('en-US')} bytes, more than ${maxGridBytes().toLocaleString('en-US')}; list axes (and zip them) rather than cells, or raise CANARY_AUDIT_MAX_CELLS`,
        { location: { file }, code: 'E_GRID_TOO_LARGE' },
      );
    }
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof UserInputError) throw error;
    throw new UserInputError(`cannot read the grid: ${gridReadReason(error as NodeJS.ErrnoException)}`, {
      location: { file },
      code: 'E_GRID_READ',
      cause: error,
    });
  }
  return parseGrid(file, text);
}

/**
 * Names and labels (`name`, `label` at any depth, and plain axis values) become cell ids, folder
 * names and lines on a terminal: a control character there (an escape sequence that retitles the
 * window or recolours the screen) is refused, one error per value.
 */
function controlCharacterErrors(source: GridSource, data: unknown): UserInputError[] {
  const errors: UserInputError[] = [];
  const check = (path: GridPath, value: string): void => {
    const c = firstControlCharacter(value);
    if (c === null) return;
    const code = `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
    errors.push(
      new UserInputError(
        `${quoteValue(value)} contains a control character (${code}); names and labels are printed on terminals: use letters, digits, spaces and punctuation`,
        {
          location: source.locate(path),
          field: formatPath(path),
          code: 'E_GRID_VALUE',
        },
      ),
    );
  };
  const walk = (value: unknown, path: GridPath, axisValue: boolean): void => {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, [...path, i], axisValue));
    else if (value !== null && typeof value === 'object') {
      for (const [key, v] of Object.entries(value)) {
        if ((key === 'name' || key === 'label') && typeof v === 'string') check([...path, key], v);
        else walk(v, [...path, key], path.length === 1 && path[0] === 'axes');
      }
    } else if (typeof value === 'string' && axisValue) check(path, value);
  };
  walk(data, [], false);
  return errors;
}

/** Parse, validate and expand grid text; `file` names it in error messages. */
export function parseGrid(file: string, text: string): LoadedGrid {
  const source = GridSource.parse(file, text);
  const data = source.value;
  if (data === null || data === undefined) {
    throw new UserInputError(
      'the grid is empty; a grid needs at least `axes` (visibility and dose) and `training`; see docs/grid.md',
      {
        location: { file, line: 1, column: 1 },
        code: 'E_GRID_EMPTY',
      },
    );
  }
  const control = controlCharacterErrors(source, data);
  if (control.length > 0) throw new UserInputErrors(control);
  if (validate('grid', data).length > 0) throw new UserInputErrors(explainGridErrors(source, data));
  const doc = data as GridDocument;
  const name = doc.name ?? defaultName(file);
  const errors: UserInputError[] = [];
  const fail = (path: GridPath, message: string): void => {
    errors.push(
      new UserInputError(message, { location: source.locate(path), field: formatPath(path), code: 'E_GRID_VALUE' }),
    );
  };

  const { batch_size: batch, rows: rowsGiven, updates: updatesGiven } = doc.training;
  let rows = 0;
  let updates = 0;
  if (rowsGiven === undefined && updatesGiven === undefined) {
    fail(['training'], 'give the training budget as `rows` or `updates` (rows = batch_size x updates)');
  } else if (rowsGiven !== undefined && rowsGiven % batch !== 0) {
    fail(
      ['training', 'rows'],
      `${rowsGiven} rows is not a multiple of batch_size ${batch}; use ${Math.floor(rowsGiven / batch) * batch} or ${Math.ceil(rowsGiven / batch) * batch}`,
    );
  } else if (rowsGiven !== undefined && updatesGiven !== undefined && rowsGiven !== batch * updatesGiven) {
    fail(
      ['training', 'updates'],
      `${updatesGiven} updates x batch_size ${batch} = ${batch * updatesGiven}, not rows ${rowsGiven}; give only one of rows and updates`,
    );
  } else {
    updates = updatesGiven ?? (rowsGiven as number) / batch;
    rows = batch * updates;
  }
  doc.eval.checkpoints.forEach((u, i) => {
    if (updates > 0 && u > updates)
      fail(['eval', 'checkpoints', i], `checkpoint at update ${u} is past the last update (${updates})`);
  });

  const space = codeSpaceOf(doc);
  if (new Set(space.alphabet).size !== space.alphabet.length || /\s/.test(space.alphabet)) {
    fail(
      ['canaries', 'code', 'alphabet'],
      `${JSON.stringify(space.alphabet)} must list distinct, non-space characters`,
    );
  }
  const size = space.alphabet.length ** space.length;
  if (doc.candidates.kind === 'exhaustive' && size > MAX_EXHAUSTIVE) {
    fail(
      ['candidates', 'kind'],
      `an exhaustive space of ${size} codes is too large (at most ${MAX_EXHAUSTIVE}); use kind: sampled with decoys`,
    );
  }
  if (doc.candidates.kind === 'sampled') {
    if (doc.candidates.decoys === undefined)
      fail(['candidates'], 'kind: sampled needs `decoys` (sampled codes per canary besides the true one)');
    else if (doc.candidates.decoys >= size)
      fail(
        ['candidates', 'decoys'],
        `${doc.candidates.decoys} decoys do not fit in a space of ${size} codes; use fewer than ${size}`,
      );
  }
  if (errors.length > 0) throw new UserInputErrors(errors);

  const models: Record<string, ModelValue> = {};
  const gridDir = dirname(resolve(file));
  for (const [key, raw] of Object.entries(doc.models ?? {})) {
    const wrong = modelProblem(raw, gridDir);
    if (wrong) {
      fail(['models', key, ...wrong.path], wrong.message);
      continue;
    }
    const model = modelFromObject(raw, gridDir);
    models[key] = model;
    const problem = pretrainProblem(model.pretrain);
    if (problem) fail(['models', key, 'pretrain', ...problem.path], problem.message);
    const hfProblem = hfModelProblem(model);
    if (hfProblem) fail(['models', key, ...hfProblem.path], hfProblem.message);
  }
  if (errors.length > 0) throw new UserInputErrors(errors);
  const ctx: AxisContext = { source, models };
  const product = expandGrid(doc, ctx);
  const expanded =
    doc.canaries.designs === 'together' ? { ...product, cells: designsTogether(product.cells) } : product;
  const together = togetherProblem(doc, expanded.cells);
  if (together) fail(together.path, together.message);
  const design = replicationDesign(doc, expanded.cells);
  for (const problem of designProblems(doc, expanded.cells)) fail(problem.path, problem.message);
  if (errors.length > 0) throw new UserInputErrors(errors);
  const expansion = { ...expanded, cells: cellsUnderDesign(expanded.cells, design) };

  const gpus = doc.training.gpus ?? 1;
  if (gpus > 1) {
    const tiny = expansion.axes.model.filter((v) => v.value.backend === 'tiny').map((v) => v.label);
    if (tiny.length > 0) {
      fail(
        ['training', 'gpus'],
        `${gpus} GPUs per run need hf models, but ${tiny.join(', ')} ${tiny.length > 1 ? 'are' : 'is'} a tiny model (one process, no sharding); remove training.gpus or use an hf model`,
      );
    }
  } else if (doc.training.parallel !== undefined) {
    fail(
      ['training', 'parallel'],
      `${doc.training.parallel} shards a run over several GPUs; set training.gpus (2 or more) or remove parallel`,
    );
  }

  for (const v of expansion.axes.schedule) {
    if (v.value.warmup_updates > updates)
      fail(
        v.path,
        `warmup of ${v.value.warmup_updates} updates is longer than the run (${updates} updates); use at most ${updates}`,
      );
  }
  // Each cue must be able to encode this code alphabet (e.g. fruit cues have 36 fruits).
  for (const v of expansion.axes.visibility) {
    try {
      cueEncoding(v.value as VisibilityValue, space);
    } catch (error) {
      fail(v.path, `${v.label} cannot encode this code alphabet: ${(error as Error).message}`);
    }
  }
  if (errors.length > 0) throw new UserInputErrors(errors);

  const normalised = { ...doc, name };
  // `analysis` changes how the report reads the runs, not the runs: a new margin keeps the audit.
  // `tracking` changes where curves are sent, not what is trained: the same runs too.
  const { analysis: _analysis, tracking: _tracking, ...planned } = normalised;
  return { file, source, doc: normalised, sha256: contentHash(planned), rows, updates, expansion, design };
}

function defaultName(file: string): string {
  const stem = basename(file, extname(file))
    .replace(/[^A-Za-z0-9_.-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '');
  return stem === '' ? 'audit' : stem;
}

import type { GridPath } from './source.js';
import type { Cell, GridDocument, ModelValue } from './types.js';

/**
 * The replication design: what the runs of one cell (its seeds) differ in, hence what population
 * an interval over them generalizes to. The reference study fine-tunes *one* pretrained model
 * under several seeds, so that is what a grid gets by default wherever it pretrains a tiny base
 * and runs more than one seed: every seed fine-tunes the same base (its initialisation fixed at
 * `ONE_BASE_INIT_SEED` unless `pretrain.init_seed` names another) with its own data order and
 * canary placement. A grid that wants base-to-base variation names it, `replicates: {vary: base}`.
 *
 * | `replicates.vary` | a tiny pretrained base | data order and placement | population |
 * |---|---|---|---|
 * | absent, tiny base pretrained or an hf checkpoint, 2+ seeds | one (init 0 or `init_seed`; hf: the checkpoint) | per seed (joint) | fine-tuning seeds of one base |
 * | absent otherwise (from scratch, hf random init, one seed) | the run's seed (as before) | fixed | as the models say |
 * | `joint` | one (init 0 or `init_seed`) | per seed | fine-tuning seeds of one base |
 * | `base` | the run's seed: one per seed | per seed | bases and seeds |
 * | `training` | the run's seed unless `init_seed` | fixed | bases and seeds, or seeds of one base |
 *
 * Grids whose design this does not change (no tiny pretrained base with 2+ seeds, or
 * `replicates` written as `training`) plan byte-identical manifests.
 */
export type SeedVariation = 'training' | 'joint' | 'base';

export type DesignPopulation =
  | 'fine-tuning seeds of one base'
  | 'bases and seeds'
  | 'seeds of from-scratch training'
  | 'one run per cell';

/** The initialisation of the one base a tiny model's seeds share when the grid names none. */
export const ONE_BASE_INIT_SEED = 0;

export interface ReplicationDesign {
  /** What a seed varies, resolved: the grid's `replicates.vary` or the default. */
  vary: SeedVariation;
  /** Whether the grid wrote `replicates.vary` (false: the default applied). */
  written: boolean;
  /** Seeds of the grid's cells, ascending. */
  seeds: number[];
  /** Whether each seed draws its own background order and canary placement. */
  joint: boolean;
  /** The init seed a tiny pretrained base takes when its `pretrain.init_seed` is unset; null: the run's seed. */
  baseInit: number | null;
  /** What an interval over a cell's runs generalizes over. */
  population: DesignPopulation;
  /** Sequential replicates (`replicates: {until: decided}`), or null: every seed runs. */
  sequential: SequentialReplicates | null;
}

/** A tiny model's base: one per seed, one for every seed, or none (from scratch); hf: one (a checkpoint) unless randomly initialised. */
function baseKind(m: ModelValue, baseInit: number | null): 'one' | 'per-seed' | 'none' {
  if (m.backend === 'hf') return m.hf?.random_init ? 'none' : 'one';
  if (!m.pretrain) return 'none';
  return m.pretrain.init_seed !== undefined || baseInit !== null ? 'one' : 'per-seed';
}

/** The design of a grid's expanded cells: pure, from the document and the cells. */
export function replicationDesign(doc: Pick<GridDocument, 'replicates'>, cells: readonly Cell[]): ReplicationDesign {
  const seeds = [...new Set(cells.map((c) => c.values.seed.value))].sort((a, b) => a - b);
  const models = [...new Set(cells.map((c) => c.values.model.value))];
  // A base every seed starts from (a tiny pretrained base, an hf checkpoint): with the rows fixed,
  // seeds of a full fine-tune would be the same run, so by default each seed draws its own rows.
  const sharedBase = models.some(
    (m) => (m.backend === 'tiny' && m.pretrain) || (m.backend === 'hf' && !m.hf?.random_init),
  );
  const writtenVary = doc.replicates?.vary;
  const vary: SeedVariation = writtenVary ?? (sharedBase && seeds.length > 1 ? 'joint' : 'training');
  const baseInit = vary === 'joint' ? ONE_BASE_INIT_SEED : null;
  const kinds = new Set(models.map((m) => baseKind(m, baseInit)));
  const population: DesignPopulation =
    seeds.length < 2
      ? 'one run per cell'
      : kinds.has('per-seed')
        ? 'bases and seeds'
        : kinds.has('one')
          ? 'fine-tuning seeds of one base'
          : 'seeds of from-scratch training';
  return {
    vary,
    written: writtenVary !== undefined,
    seeds,
    joint: vary !== 'training',
    baseInit,
    population,
    sequential: sequentialReplicates(doc, cells),
  };
}

/**
 * Cells whose tiny pretrained base the design fixes: the model value gains `pretrain.init_seed`
 * (the label and key stay as written, so cell ids do not move). Other cells are returned as they
 * are; model values are copied, never changed in place (presets are shared).
 */
export function cellsUnderDesign(cells: Cell[], design: ReplicationDesign): Cell[] {
  if (design.baseInit === null) return cells;
  const fixed = new Map<ModelValue, ModelValue>();
  const fix = (m: ModelValue): ModelValue => {
    if (m.backend !== 'tiny' || !m.pretrain || m.pretrain.init_seed !== undefined) return m;
    let out = fixed.get(m);
    if (!out) fixed.set(m, (out = { ...m, pretrain: { ...m.pretrain, init_seed: design.baseInit as number } }));
    return out;
  };
  return cells.map((c) => {
    const m = fix(c.values.model.value);
    return m === c.values.model.value ? c : { ...c, values: { ...c.values, model: { ...c.values.model, value: m } } };
  });
}

/**
 * Problems of a written `replicates` the schema cannot see, each as a grid path and a message:
 * `vary: base` needs a tiny model whose base it can vary, and contradicts a fixed `init_seed`.
 */
export function designProblems(
  doc: Pick<GridDocument, 'replicates'>,
  cells: readonly Cell[],
): { path: GridPath; message: string }[] {
  const sequential = sequentialProblems(doc, cells);
  if (sequential.length > 0 || doc.replicates?.vary !== 'base') return sequential;
  const models = new Map<string, ModelValue>();
  for (const c of cells) models.set(c.values.model.label, c.values.model.value);
  const fixed = [...models]
    .filter(([, m]) => m.backend === 'tiny' && m.pretrain?.init_seed !== undefined)
    .map(([label]) => label);
  if (fixed.length > 0) {
    return [
      {
        path: ['replicates', 'vary'],
        message: `vary: base gives each seed its own base, but model(s) ${fixed.join(', ')} fix one base with pretrain.init_seed; remove init_seed, or use vary: joint (one base, fine-tuning seeds)`,
      },
    ];
  }
  if (![...models.values()].some((m) => m.backend === 'tiny' && m.pretrain)) {
    return [
      {
        path: ['replicates', 'vary'],
        message:
          'vary: base gives each seed its own pretrained base, but no model of this grid pretrains one (an hf model is one pretrained checkpoint; a tiny model with pretrain: false trains from scratch); use vary: joint',
      },
    ];
  }
  return [];
}

/** Sequential replicates as the grid wrote them (`replicates: {until: decided, ...}`), or null. */
export interface SequentialReplicates {
  min: number;
  max: number;
  spending: 'pocock' | 'obrien-fleming';
  /** The seed axis's values in the order looks add them (the first `min` at look 1). */
  seeds: number[];
}

export function sequentialReplicates(
  doc: Pick<GridDocument, 'replicates'>,
  cells: readonly Cell[],
): SequentialReplicates | null {
  const r = doc.replicates;
  if (r?.until !== 'decided' || r.min === undefined || r.max === undefined) return null;
  // The seed axis in its written order (cells hold each seed once per arm; their order follows it).
  const seeds = [...new Set(cells.map((c) => c.values.seed.value))];
  return { min: r.min, max: r.max, spending: r.spending ?? 'pocock', seeds };
}

/** `until: decided` needs min ≤ max and a seed axis of exactly `max` seeds (the schema checks the rest). */
function sequentialProblems(
  doc: Pick<GridDocument, 'replicates'>,
  cells: readonly Cell[],
): { path: GridPath; message: string }[] {
  const r = doc.replicates;
  if (r?.until !== 'decided' || r.min === undefined || r.max === undefined) return [];
  if (r.min > r.max)
    return [
      {
        path: ['replicates', 'min'],
        message: `min ${r.min} is above max ${r.max}; the first look runs min seeds per cell and the last max, so use min ≤ max`,
      },
    ];
  const seeds = new Set(cells.map((c) => c.values.seed.value)).size;
  if (seeds !== r.max) {
    const example = Array.from({ length: Math.min(r.max, 12) }, (_, i) => i).join(', ');
    return [
      {
        path: ['replicates', 'max'],
        message: `max is ${r.max} but axes.seed lists ${seeds} seed${seeds === 1 ? '' : 's'}; list exactly ${r.max} seeds, in the order looks add them (seed: [${example}${r.max > 12 ? ', …' : ''}]), or set max: ${seeds}`,
      },
    ];
  }
  return [];
}

/** The sequential design in words, for `plan`'s design line: `seeds 3 to ≤10 per cell, added while …`. */
export function sequentialText(s: Pick<SequentialReplicates, 'min' | 'max' | 'spending'>): string {
  return `seeds ${s.min} to ≤${s.max} per cell, added while a declared comparison is undecided (${s.spending === 'pocock' ? 'Pocock' : "O'Brien–Fleming"}-type alpha spending over ${s.max - s.min + 1} looks)`;
}

/** Intervals over a cell's runs generalize over …, in words for the plan and the report. */
export function designSentence(d: Pick<ReplicationDesign, 'population'>): string {
  return d.population === 'one run per cell'
    ? 'one run per cell: intervals cover canary sampling only, a rerun can fall outside them'
    : `intervals generalize over ${d.population}`;
}

/** How many runs the arms of a grid hold (cells equal but for the seed): `3`, or `2-3` when they differ. */
function runsPerArm(cells: readonly Cell[]): string {
  const arms = new Map<string, number>();
  for (const c of cells) {
    const key = JSON.stringify(Object.entries(c.labels).filter(([axis]) => axis !== 'seed'));
    arms.set(key, (arms.get(key) ?? 0) + 1);
  }
  const counts = [...arms.values()];
  const [lo, hi] = [Math.min(...counts), Math.max(...counts)];
  return lo === hi ? String(lo) : `${lo}-${hi}`;
}

/** Each model's base under the design, e.g. `tiny: init seed 0`, `qwen3-0.6b: its checkpoint`. */
function basesText(cells: readonly Cell[]): string {
  const models = new Map<string, ModelValue>();
  for (const c of cells) models.set(c.values.model.label, c.values.model.value);
  return [...models]
    .map(([label, m]) => {
      if (m.backend === 'hf') return `${label}: ${m.hf?.random_init ? 'random init per seed' : 'its checkpoint'}`;
      if (!m.pretrain) return `${label}: from scratch`;
      return m.pretrain.init_seed !== undefined
        ? `${label}: init seed ${m.pretrain.init_seed}`
        : `${label}: a base per seed`;
    })
    .join('; ');
}

/**
 * The design in one line, as `plan` prints it, e.g. `design: one base (tiny: init seed 0), 3
 * fine-tuning seeds per cell, each its own data order and canary placement; intervals generalize
 * over fine-tuning seeds of one base`.
 */
export function designLine(design: ReplicationDesign, cells: readonly Cell[]): string {
  if (design.population === 'one run per cell')
    return `design: one run per cell (seed ${design.seeds.join(', ')}): intervals cover canary sampling only, a rerun can fall outside them`;
  // Sequential: the looks' seeds replace the count (each arm lists max seeds as planned).
  const seq = design.sequential;
  const n = runsPerArm(cells);
  const varies = design.joint
    ? 'each its own data order and canary placement'
    : 'varying the training seed only (data order and placement fixed by the grid seed)';
  const bases = basesText(cells);
  const head =
    design.population === 'bases and seeds'
      ? `a base per seed (${bases})${design.vary === 'base' ? ', replicates: {vary: base}' : ''}, ${seqOr(n, 'seeds per cell', seq)}`
      : design.population === 'fine-tuning seeds of one base'
        ? `one base per model (${bases}), ${seqOr(n, 'fine-tuning seeds per cell', seq)}`
        : `no pretrained base (${bases}), ${seqOr(n, 'seeds per cell', seq)}`;
  return `design: ${head}, ${varies}; ${designSentence(design)}`;
}

/** `3 fine-tuning seeds per cell`, or sequentially `fine-tuning seeds 3 to ≤10 per cell, added while …`. */
function seqOr(n: string, what: string, seq: SequentialReplicates | null): string {
  if (!seq) return `${n} ${what}`;
  return `${what.replace(/^seeds per cell$/, '').replace(/ seeds per cell$/, ' ')}${sequentialText(seq)}`;
}

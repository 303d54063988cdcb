import type { FinetuneSpec, HfModelSpec, TinyModelSpec, TrainingSettings } from '../contracts/index.js';
import type { GridPath } from './source.js';

/**
 * Types of an audit grid: the document as written (after schema defaults) and the normalised axis
 * values that expansion and planning work with. schemas/grid.schema.json is the source of truth.
 */
export type AxisName =
  | 'visibility'
  | 'dose'
  | 'placement'
  | 'population'
  | 'schedule'
  | 'model'
  | 'task'
  | 'design'
  | 'seed';

/** Canonical axis order: cell ids list axes in it, and the product varies the last axis fastest. */
export const AXES: readonly AxisName[] = [
  'visibility',
  'dose',
  'placement',
  'population',
  'schedule',
  'model',
  'task',
  'design',
  'seed',
];

export type Window = [number, number];

export interface RawCohort {
  name?: string;
  dose: number;
  count: number;
  order?: 'before' | 'after' | 'with';
  window?: Window;
  spacing?: number;
}

export interface GridDocument {
  name?: string;
  description?: string;
  seed: number;
  axes: Partial<Record<AxisName, unknown[]>>;
  include?: Partial<Record<AxisName, unknown>>[];
  exclude?: Partial<Record<AxisName, unknown>>[];
  zip?: AxisName[][];
  /** The budget is `rows` or `updates` (one implies the other); max_length defaults per model. */
  training: TrainingSettings & { rows?: number; updates?: number; max_length?: number };
  /** `inclusion: randomized`: each focal and held-out canary inserted by a fair coin (absent: fixed roles). */
  canaries: {
    focal: number;
    held_out: number;
    inclusion?: 'fixed' | 'randomized';
    /** With a design axis: `together` puts every design's canaries in one run per cell and seed (absent: separate). */
    designs?: 'separate' | 'together';
    code: { alphabet: string; length: number };
  };
  candidates: { kind: 'exhaustive' | 'sampled'; decoys?: number };
  probes: { kinds: ('hidden' | 'supplied' | 'substituted')[]; decode: ('prefill' | 'free')[]; auxiliary: boolean };
  eval: { base_model: boolean; checkpoints: number[]; max_new_tokens: number; score_batch_size: number };
  utility: { rows: number };
  /**
   * What a seed value varies: `joint` adds the background order and the canary placement, `base`
   * also a tiny model's base (absent: `joint` where a tiny base is pretrained and 2+ seeds run,
   * else `training`; src/grid/design.ts).
   */
  replicates?: {
    vary?: 'training' | 'joint' | 'base';
    /**
     * Sequential replicates: `until: decided` runs the first `min` seeds of the seed axis, then adds
     * the next seed to the cells an undecided declared comparison rests on, up to `max` seeds (the
     * seed axis lists exactly `max`), spending α over the looks by `spending` (default pocock;
     * src/metrics/sequential.ts).
     */
    until?: 'decided';
    min?: number;
    max?: number;
    spending?: 'pocock' | 'obrien-fleming';
  };
  /**
   * How the report reads the runs: `margin_bits` (default 1), the verdicts' equivalence margin in
   * bits; `threshold_strategy` (default bonferroni) of the Clopper–Pearson and both one-run ε bounds; `extrapolate`
   * (default false), extrapolated exposure for sampled spaces. Not part of the audit id.
   */
  analysis?: {
    margin_bits?: number;
    threshold_strategy?: 'bonferroni' | 'split' | 'multisplit';
    extrapolate?: boolean;
  };
  /** Experiment tracking besides each run's TensorBoard files: W&B project (and entity). Not part of the audit id. */
  tracking?: { wandb?: { project: string; entity?: string } };
  models?: Record<string, Record<string, unknown>>;
}

/** One value of an axis, normalised: `label` names it in cell ids, `key` is its canonical content. */
export interface AxisValue<T> {
  label: string;
  key: string;
  value: T;
  /** Where it was written (for error messages). */
  path: GridPath;
}

export interface VisibilityValue {
  scheme: string;
  width?: number;
  shift?: number;
}

export interface PlacementValue {
  /** [from, to] fractions of the run's updates. */
  window: Window;
  /** Exact gap in updates between consecutive appearances, or null for free placement. */
  spacing: number | null;
  /** Window of the last appearance, or null. */
  final: Window | null;
}

export interface CohortSpec {
  name: string;
  dose: number;
  count: number;
  order: 'before' | 'after' | 'with';
  window: Window | null;
  spacing: number | null;
}

export interface PopulationValue {
  kind: 'none' | 'single-dose' | 'mixed-dose' | 'cohorts';
  /** mixed-dose: companion doses; undefined means every value of the dose axis. */
  doses?: number[];
  /** mixed-dose: canaries per companion dose; undefined means the focal count. */
  count?: number;
  cohorts?: CohortSpec[];
}

export interface ScheduleValue {
  kind: 'constant' | 'cosine';
  warmup_updates: number;
  min_lr_ratio: number;
}

/** Pretraining of a tiny model's base (see pretrain.ts); the rows file is made per audit. */
export interface PretrainValue {
  updates: number;
  batch_size: number;
  lr: number;
  schedule: ScheduleValue;
  /** Fraction of pretraining rows that show a random code and start the reply with it. */
  code_fraction: number;
  /** Seed of the corpus stream (and of the trainer's dropout stream while pretraining). */
  seed: number;
  /**
   * The base's initialisation seed for every run of the model (one base, fine-tuned under each
   * seed, as the study fine-tunes one pretrained checkpoint); absent: the run's seed axis value.
   */
  init_seed?: number;
}

export interface ModelValue {
  backend: 'tiny' | 'hf';
  name: string;
  revision: string | null;
  /** Sizes only: the manifest's `tiny.pretrain` is added when the rows file is written. */
  tiny?: Omit<TinyModelSpec, 'pretrain'>;
  /** Tiny models: the base's pretraining, or null to train from scratch. */
  pretrain?: PretrainValue | null;
  hf?: HfModelSpec;
  finetune: FinetuneSpec;
}

/**
 * Canary design (what the secret is): `codes`, the grid's code space as written; `rare-tokens`,
 * `length` tokens drawn uniformly from the `pool` rarest tokens of the model's tokenizer, ranked
 * against `decoys` sampled candidates drawn the same way (src/manifest/designs.ts); `sampled-text`,
 * texts sampled from the base model by the trainer (below).
 */
export type DesignValue =
  | { kind: 'codes' }
  | { kind: 'rare-tokens'; length: number; pool: number; decoys: number }
  | SampledTextDesign;

/**
 * `sampled-text`: each canary's secret is `length` tokens the trainer samples from the base model
 * at `temperature`, ranked against `decoys` samples drawn the same way. The controller cannot know
 * the texts (only the trainer has the base): the manifest carries placeholders and the sampling
 * spec, the trainer fills them (src/manifest/sampled-text.ts, trainer-py sampled_text.py).
 */
export interface SampledTextDesign {
  kind: 'sampled-text';
  /** Tokens per secret (default 8). */
  length: number;
  /** Softmax temperature of the sampling (default 1.0: the base model's own distribution). */
  temperature: number;
  /** Sampled decoys per canary (default 999). */
  decoys: number;
}

export interface TaskValue {
  name: string;
  params: Record<string, unknown>;
}

export interface AxisValueTypes {
  visibility: VisibilityValue;
  dose: number;
  placement: PlacementValue;
  population: PopulationValue;
  schedule: ScheduleValue;
  model: ModelValue;
  task: TaskValue;
  design: DesignValue;
  seed: number;
}

export type NormalisedAxes = { [A in AxisName]: AxisValue<AxisValueTypes[A]>[] };

/**
 * One grid cell: a value per axis. `dose` and `placement` are null in a no-canary cell
 * (population none), where they mean nothing.
 */
export type CellValues = {
  [A in AxisName]: A extends 'dose' | 'placement' ? AxisValue<AxisValueTypes[A]> | null : AxisValue<AxisValueTypes[A]>;
};

export interface Cell {
  /** Stable readable id, e.g. visibility=redacted,dose=8,seed=0. */
  id: string;
  values: CellValues;
  /**
   * `canaries.designs: together`: the designs whose canaries share this cell's run, in the grid's
   * order (values.design is the first); absent: the cell's one design.
   */
  designs?: AxisValue<DesignValue>[];
  /** Axis labels for manifests and reports (dose and seed as numbers, null where not applicable). */
  labels: Record<AxisName, string | number | null>;
}

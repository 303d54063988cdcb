import type { Provenance } from '../provenance/index.js';
import type { DatasetProvenance } from './dataset.js';

/**
 * TypeScript view of schemas/manifest.schema.json (canary-audit.manifest/1). The schema is the
 * contract; these types follow it field for field. Paths are relative to the manifest's folder.
 */
export const MANIFEST_VERSION = 'canary-audit.manifest/1';

export type Role = 'system' | 'user' | 'assistant';
/** A text part of a message's content. */
export interface TextPart {
  type: 'text';
  text: string;
}

/** An image part: a PNG beside the rows, `images/<sha256>.png`, content-addressed. */
export interface ImagePart {
  type: 'image';
  path: string;
  sha256: string;
  width: number;
  height: number;
  /**
   * A canary's source pane (identity line, label and code region), [x0, y0, x1, y1] in pixels:
   * the crop the tiny vision model reads (other models see the whole image).
   */
  source?: [number, number, number, number];
}

export type ContentPart = TextPart | ImagePart;

/** `content`: a string (text tasks), or parts as vision-language chat templates take them. */
export interface Message {
  role: Role;
  content: string | ContentPart[];
}

/** The text of a message: the string, or its text parts joined by newlines. */
export function messageText(message: Message): string {
  if (typeof message.content === 'string') return message.content;
  return message.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n');
}

/** The image parts of messages, in order. */
export function messageImages(messages: readonly Message[]): ImagePart[] {
  return messages.flatMap((m) =>
    typeof m.content === 'string' ? [] : m.content.filter((p): p is ImagePart => p.type === 'image'),
  );
}

/** An image file of a run (the manifest's `images`): path under the run folder, sha256, size. */
export interface ImageRef {
  path: string;
  sha256: string;
  bytes: number;
}

export interface FileRef {
  path: string;
  sha256: string;
  /** Number of lines. */
  count: number;
}

/** A utility metric (schemas/manifest.schema.json `utility.metrics`); docs/metrics.md defines each. */
export const UTILITY_METRICS = ['loss', 'accuracy', 'exact_match', 'token_f1', 'point_in_box', 'parse_rate'] as const;
export type UtilityMetric = (typeof UTILITY_METRICS)[number];

/**
 * `utility`: utility.jsonl plus what to measure on it. Absent `metrics` = `['loss']` (manifests
 * written before these fields). Any metric besides `loss` makes the trainer decode every row's
 * prompt greedily with the base and the final model, up to `max_new_tokens` (then required).
 */
export interface UtilityRef extends FileRef {
  metrics?: UtilityMetric[];
  max_new_tokens?: number;
}

/**
 * `model.tiny.vision`: a grey crop (an image part's `source` box, else the whole image) resized to
 * height x width, 3x3 convolutions of `channels` each followed by 2x2 max pooling, a last
 * convolution to d_model, average-pooled to rows x cols image tokens; images over `max_pixels`
 * are refused. `freeze` (written only when true; absent is false): fine-tuning leaves the stem's
 * weights as the base's (pretraining trains it).
 */
export interface TinyVisionSpec {
  height: number;
  width: number;
  channels: number[];
  rows: number;
  cols: number;
  max_pixels: number;
  freeze?: boolean;
}

export interface TinyModelSpec {
  n_layer: number;
  n_head: number;
  d_model: number;
  /** Context length in tokens (characters). */
  max_len: number;
  dropout: number;
  /** A vision stem in front of the decoder (the tiny VLM); absent: the model reads text only. */
  vision?: TinyVisionSpec;
  /** Pretrain the base before fine-tuning; absent: fine-tune the random initialisation. */
  pretrain?: TinyPretrainSpec;
}

/**
 * `model.tiny.pretrain`: the base = init from `init_seed` (default `model.init_seed`), then trained on `rows` in order
 * exactly like fine-tuning (target-only loss; AdamW with training's betas, weight_decay and
 * grad_clip; this lr and schedule). The trainer caches the base by content.
 */
export interface TinyPretrainSpec {
  /** Inside the run folder; count === updates * batch_size. */
  rows: FileRef;
  updates: number;
  batch_size: number;
  lr: number;
  /** Default: cosine, 20 warmup updates, min_lr_ratio 0.1. */
  schedule: ScheduleSpec;
  /** Dropout stream of pretraining; default 0. */
  seed: number;
  /**
   * The base's initialisation seed, written only when the grid sets it: then every run of the
   * model starts from one base whatever its `model.init_seed`. Absent: `model.init_seed`.
   */
  init_seed?: number;
}

export interface HfModelSpec {
  dtype: 'bfloat16' | 'float16' | 'float32';
  random_init: boolean;
  config_overrides: Record<string, unknown>;
  chat_template_kwargs: Record<string, unknown>;
  trust_remote_code: boolean;
  attn_implementation: string | null;
  /** A vision-language model's tower trains too; written only when true (absent: frozen). */
  train_vision?: true;
}

export type FinetuneSpec =
  | { method: 'full' }
  | { method: 'lora'; r: number; alpha: number; dropout: number; target_modules: string[] };

export interface ModelSpec {
  backend: 'tiny' | 'hf';
  name: string;
  revision: string | null;
  init_seed: number;
  tiny?: TinyModelSpec;
  hf?: HfModelSpec;
  finetune: FinetuneSpec;
}

export interface ScheduleSpec {
  kind: 'constant' | 'cosine';
  warmup_updates: number;
  min_lr_ratio: number;
}

export interface TrainingSpec {
  lr: number;
  schedule: ScheduleSpec;
  /** Rows per optimizer update; update i consumes rows [i*B, (i+1)*B). */
  batch_size: number;
  updates: number;
  max_length: number;
  seed: number;
  weight_decay: number;
  betas: [number, number];
  grad_clip: number;
  checkpoint_every: number;
  loss_explode: number;
  device: 'auto' | 'cpu' | 'cuda';
  /** Ranks of one run on one host (absent: one process); written only when > 1. */
  gpus?: number;
  /** How the ranks share the model; written with gpus. */
  parallel?: 'fsdp';
}

/** The settings a grid's `training` block gives once for every run (the manifest adds the rest per cell). */
export type TrainingSettings = Pick<
  TrainingSpec,
  | 'batch_size'
  | 'lr'
  | 'weight_decay'
  | 'betas'
  | 'grad_clip'
  | 'checkpoint_every'
  | 'loss_explode'
  | 'device'
  | 'gpus'
  | 'parallel'
>;

export interface Cue {
  /** visible | redacted | encoded:<scheme> */
  visibility: string;
  /** How the code appears in the training input. */
  text: string;
  params?: Record<string, unknown>;
}

export interface InsertedCanary {
  id: string;
  /** `focal` or the name of an auxiliary cohort. */
  cohort: string;
  identity: string;
  code: string;
  cue: Cue;
  dose: number;
  window?: [number, number];
  /** Row indices in rows.jsonl, ascending; length === dose. */
  positions: number[];
  candidates?: string[];
  /** Designs together in one run: the label of the design this canary's secret comes from. */
  design?: string;
}

export interface HeldOutCanary {
  id: string;
  identity: string;
  code: string;
  candidates?: string[];
  /** Designs together in one run: the label of the design this canary's secret comes from. */
  design?: string;
}

export type ProbeKind = 'hidden' | 'supplied' | 'substituted';
export type DecodeMode = 'prefill' | 'free';

export interface Probe {
  id: string;
  canary_id: string;
  kind: ProbeKind;
  shown_code: string | null;
  prompt: Message[];
  /** Target text up to the code. */
  prefill: string;
  decode: DecodeMode[];
}

export interface CandidateSpace {
  kind: 'exhaustive' | 'sampled';
  alphabet: string;
  length: number;
  size: number;
  decoys?: number;
  seed?: number;
}

/**
 * Design sampled-text (manifest `sampled_text`): the canaries' codes, substitutes and candidates
 * are placeholders the trainer fills with texts it samples from the base model before training.
 */
export interface SampledTextSpec {
  /** Tokens per sampled text. */
  length: number;
  /** Softmax temperature of the sampling. */
  temperature: number;
  /** Decoys sampled per canary. */
  decoys: number;
  /** The sampling context: the start of an assistant reply to one empty user message. */
  context: 'reply-start';
  grid_seed: number;
  /** Per canary id: its sampling seed, from the grid seed and the id (src/manifest/sampled-text.ts). */
  seeds: Record<string, number>;
}

export interface EvalSpec {
  base_model: boolean;
  checkpoints: number[];
  max_new_tokens: number;
  score_batch_size: number;
}

export interface Manifest {
  schema_version: typeof MANIFEST_VERSION;
  run_id: string;
  /** Randomized inclusion (grid `canaries.inclusion: randomized`): each pool canary inserted by a fair coin. */
  inclusion?: { kind: 'randomized'; p: number; pool: number; seed: number };
  /** Design sampled-text: how the trainer fills the placeholder secrets. */
  sampled_text?: SampledTextSpec;
  audit: {
    id: string;
    name: string;
    grid_file?: string | null;
    grid_sha256: string;
    cell_id: string;
    cell: Record<string, unknown>;
  };
  /** `dataset`: where a dataset-backed task's rows came from (repo, pinned sha, file hashes). */
  task: {
    name: string;
    seed: number;
    params?: Record<string, unknown>;
    dataset?: DatasetProvenance;
    utility_dataset?: DatasetProvenance;
  };
  model: ModelSpec;
  training: TrainingSpec;
  rows: FileRef;
  utility?: UtilityRef;
  /** Image tasks only: every image the rows, utility rows and probes show, sorted by path. */
  images?: ImageRef[];
  canaries: InsertedCanary[];
  held_out: HeldOutCanary[];
  probes: Probe[];
  candidate_space: CandidateSpace;
  eval: EvalSpec;
  provenance: Provenance;
}

/** One line of rows.jsonl / utility.jsonl (schemas/row.schema.json). */
export interface Row {
  i: number;
  kind: 'background' | 'canary';
  canary_id?: string | null;
  /** Context only: loss-masked. */
  prompt: Message[];
  /** The assistant reply: the only trained text. */
  target: string;
  /** Grounding rows: the target element's box [x0, y0, x1, y1] in image pixels. */
  box?: [number, number, number, number];
}

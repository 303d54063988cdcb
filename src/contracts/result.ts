import type { Provenance } from '../provenance/index.js';
import type { ProbeKind, SampledTextSpec } from './manifest.js';

/** schemas/result.schema.json (canary-audit.result/1). Paths relative to result.json's folder. */
export const RESULT_VERSION = 'canary-audit.result/1';

export interface Greedy {
  text: string;
  code: string | null;
}

export interface ProbeResult {
  probe_id: string;
  canary_id: string;
  arm: 'inserted' | 'held_out';
  kind: ProbeKind;
  /** float32 little-endian, one score (natural-log probability) per candidate, candidate order. */
  scores_file: string;
  scores_sha256: string;
  n_candidates: number;
  greedy: { prefill?: Greedy; free?: Greedy };
}

/**
 * The tiny backend's base: `random` (model.init_seed's initialisation, only `kind`) or `pretrained`
 * (model.tiny.pretrain; every field). The base evaluation phase and utility.base_loss are measured on it.
 */
export type BaseModel =
  | { kind: 'random' }
  | {
      kind: 'pretrained';
      /** File name (without .pt) in $CANARY_TRAINER_CACHE/tiny-base/. */
      cache_key: string;
      /** True when this run loaded a base built earlier or by a concurrent trainer. */
      from_cache: boolean;
      updates: number;
      final_loss: number;
      /** Seconds this run spent obtaining the base (pretraining, or waiting for and loading the cache). */
      wall_s: number;
      /** Seconds the pretraining took in the trainer that built it. */
      build_wall_s: number;
    };

export interface Evaluation {
  /** base | final | update-<n> */
  phase: string;
  update: number;
  wall_s?: number;
  probes: ProbeResult[];
}

export interface Result {
  schema_version: typeof RESULT_VERSION;
  run_id: string;
  manifest_sha256: string;
  backend: {
    name: 'tiny' | 'hf';
    model: string;
    revision?: string | null;
    device: string;
    dtype?: string;
    parameters: number;
    trainable_parameters?: number;
    scoring: 'prefix-tree' | 'per-candidate';
    /** tiny backend: the weights fine-tuning started from. */
    base_model?: BaseModel;
  };
  candidate_space: { kind: 'exhaustive' | 'sampled'; size: number };
  training: {
    updates: number;
    rows: number;
    tokens?: number;
    final_loss: number;
    loss_curve: [number, number][];
    wall_s: number;
    rows_per_s?: number;
    tokens_per_s?: number;
    resumed_from?: number | null;
    /** Checkpoints a resume passed over (failed content hashes, or did not load), over all attempts. */
    checkpoints_skipped?: SkippedCheckpoint[];
  };
  evaluations: Evaluation[];
  utility: {
    rows?: number;
    base_loss?: number | null;
    final_loss?: number | null;
    /** utility/base.jsonl: the base model's greedy reply per utility row (absent or null: not decoded). */
    base_outputs?: UtilityOutputs | null;
    /** utility/final.jsonl: the final model's greedy reply per utility row. */
    final_outputs?: UtilityOutputs | null;
  };
  rendered: { canary?: string | null; background?: string | null };
  provenance: Provenance;
  /** The run's floating-point path (absent in results written before it was recorded). */
  numerics?: Numerics;
  /** How far fine-tuning moved each trainable parameter group (absent in older results and sharded runs). */
  weight_change?: WeightChange;
  /** Design sampled-text: the texts the trainer sampled and filled in for the manifest's placeholders. */
  sampled_text?: SampledTextResult;
}

/** result.json `weight_change`: per trainable parameter group, ‖W₁ − W₀‖ and ‖W₀‖. */
export interface WeightChange {
  /** The update this trainer process started training from (0, or a resumed checkpoint's). */
  since_update: number;
  changed: number;
  total: number;
  groups: { name: string; numel: number; norm_start: number; norm_delta: number; rel_change: number | null }[];
}

/**
 * What decides a run's floating-point results beyond its manifest: two runs of one manifest agree
 * bit for bit only when these agree (torch's CPU capability alone moves a tiny-model exposure by
 * several bits).
 */
export interface Numerics {
  cpu_model: string | null;
  /** torch.backends.cpu.get_cpu_capability(): AVX512, AVX2, DEFAULT, … */
  cpu_capability: string | null;
  threads: number;
  interop_threads: number;
  device: string;
  gpu_model: string | null;
  gpu_count: number;
  driver_version: string | null;
  cuda_version: string | null;
  cudnn_version: string | null;
  dtype: string;
  deterministic_algorithms: boolean;
  cudnn_deterministic: boolean;
  cudnn_benchmark: boolean;
}

/**
 * A utility outputs file: one JSON line `{i, text}` per utility row, in file order; `path` is
 * relative to the folder holding result.json, `sha256` over its bytes, `count` its lines.
 */
export interface UtilityOutputs {
  path: string;
  sha256: string;
  count: number;
}

/** One line of utility/base.jsonl or utility/final.jsonl. */
export interface UtilityOutputLine {
  i: number;
  /** The greedy reply, its end-of-turn marker removed. */
  text: string;
}

/**
 * Written by a worker beside result.json's place when a run fails for good (no more retries), so a
 * report can list the run and say why: runs/<run_id>/output/failure.json.
 */
export interface RunFailure {
  run_id: string;
  kind: string;
  message: string;
  attempts: number;
  time: string;
}

/** A checkpoint not resumed from: its update and why (a file changed after it was written, ...). */
export interface SkippedCheckpoint {
  update: number;
  reason: string;
}

/** result.json `sampled_text`: the manifest's spec repeated, the run folder's file of every text, each canary's secret and substitute. */
export interface SampledTextResult extends SampledTextSpec {
  file: string;
  sha256: string;
  canaries: Record<string, { secret: string; substitute: string }>;
}

/**
 * What canary-audit stores in BullMQ jobs. Job data holds paths relative to the artifact root, so
 * hosts that mount a shared artifact store at different places can all run the same job.
 */

/** Data of one run job (queue `runs`, job id = run id). */
export interface RunJobData {
  audit_id: string;
  run_id: string;
  cell_id: string;
  /** manifest.json, relative to the artifact root (POSIX separators). */
  manifest: string;
  /** GPU slots of one host the run takes at once (the manifest's training.gpus); absent = 1. */
  gpus?: number;
}

/** Data of the audit parent job (queue `audits`, job id = audit id). */
export interface AuditJobData {
  audit_id: string;
  name: string;
  /** The audit folder, relative to the artifact root. */
  audit_dir: string;
  /** Every run of the audit, in plan order: status lists runs that cancel removed from Redis. */
  runs: { run_id: string; cell_id: string }[];
  submitted: string;
  /** Random id of the submit that created the jobs: of concurrent identical submits, only that one says `added`. */
  submit_id?: string;
  /** Sequential replicates: where the looks stand (absent for a fixed grid). */
  sequential?: SequentialProgress;
  /** Sequential replicates: the previous looks' summary, merged into this parent's (src/queue/audit-return.ts). */
  earlier?: AuditReturn;
}

/** An audit with sequential replicates as `status` shows it: `seed 5 of ≤10: 2 comparisons undecided`. */
export interface SequentialProgress {
  /** The look whose runs are queued or running (the last one read once done). */
  look: number;
  /** Seeds per still-needed cell at that look. */
  seeds: number;
  max: number;
  /** Comparisons still open, and stopped decided, after the last look read (all open before the first). */
  undecided: number;
  decided: number;
  done: boolean;
}

/**
 * Lifecycle of one attempt as the worker sees it; BullMQ's own state (waiting, active...) is separate.
 * `pretraining`: a tiny model's base is being pretrained (update/total count pretraining updates).
 * `waiting_base`: another trainer is pretraining the base this run needs (`waiting` says which).
 */
export type RunPhase =
  | 'starting'
  | 'waiting_base'
  | 'pretraining'
  | 'training'
  | 'evaluating'
  | 'finishing'
  | 'stopping';

/** What a run in phase `waiting_base` waits for. */
export interface RunWait {
  on: 'base_model';
  /** The run building the base, and its trainer's pid, as the base's lock file names them (null: not said). */
  run_id: string | null;
  pid: number | null;
  /** Unix milliseconds the wait began. */
  since: number;
}

/** job.progress of a run job: what `status` shows for an active run. */
export interface RunProgress {
  phase: RunPhase;
  host: string;
  /** GPU index the worker pinned with CUDA_VISIBLE_DEVICES ("0,1,2,3" for a run over several), or null on a CPU worker. */
  gpu: string | null;
  /** Worker process id and the trainer's process id. */
  worker_pid: number;
  trainer_pid: number | null;
  /** 1-based attempt number (BullMQ attemptsMade + 1). */
  attempt: number;
  device: string | null;
  update: number;
  total: number | null;
  loss: number | null;
  rows_per_s: number | null;
  /** Seconds of training left at the rate measured in this attempt; null until measurable. */
  eta_s: number | null;
  resumed_from: number | null;
  last_checkpoint: number | null;
  eval: { phase: string; done: number; total: number } | null;
  /** Set while the phase is `waiting_base`; absent in records written before it existed. */
  waiting?: RunWait | null;
  /**
   * Wall seconds this attempt spent in each phase, up to `updated` (the audit ETA tells a run's own
   * work from waiting for or building a shared base). Absent in records written before it existed.
   */
  phase_s?: Partial<Record<RunPhase, number>>;
  /** Unix milliseconds of the last update. */
  updated: number;
}

/** Return value of a completed run job. */
export interface RunReturn {
  run_id: string;
  /** result.json, relative to the artifact root. */
  result: string;
  /** The trainer's output folder, relative to the artifact root. */
  output: string;
  wall_s: number;
  /** Seconds the trainer process ran, as the worker measured it (start-up included); 0 when reused before a trainer started. */
  process_s: number;
  host: string;
  gpu: string | null;
  /** True when result.json already existed for this manifest and nothing trained: found by the worker before starting a trainer, or by the trainer once it held the output folder. */
  reused: boolean;
}

/** Return value of the audit parent: which runs finished and which failed for good. */
export interface AuditReturn {
  audit_id: string;
  completed: string[];
  failed: { run_id: string; reason: string }[];
  /** Runs that cancel removed from the queue before they started. */
  cancelled: string[];
  finished: string;
}

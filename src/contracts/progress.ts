import type { Stamp } from '../provenance/index.js';
import type { SkippedCheckpoint } from './result.js';

/** schemas/progress.schema.json: one JSON object per trainer stdout line. */
export const PROGRESS_VERSION = 1;

interface Base {
  v: 1;
  t: number;
}

export interface StartedEvent extends Base {
  event: 'started';
  run_id: string;
  pid: number;
  device: string;
  backend: 'tiny' | 'hf';
  total_updates: number;
  resumed_from: number | null;
  provenance?: Stamp;
  /** Checkpoints this start passed over (failed content hashes, or did not load). */
  checkpoints_skipped?: SkippedCheckpoint[];
}

export interface StepEvent extends Base {
  event: 'step';
  /** Only on steps of the tiny base's pretraining (update/total then count those); absent when fine-tuning. */
  phase?: 'pretrain';
  update: number;
  total: number;
  loss: number;
  lr: number;
  rows_per_s: number;
  tokens_per_s?: number;
}

/**
 * The trainer waits for something another trainer is making (the shared tiny base model): once when
 * the wait starts, again when the holder changes, and with `ended` true when it holds the lock.
 */
export interface WaitEvent extends Base {
  event: 'wait';
  on: 'base_model';
  key?: string;
  /** The trainer building it, as its lock file says. */
  holder_pid?: number;
  holder_run?: string;
  ended: boolean;
  waited_s?: number;
}

export interface CheckpointEvent extends Base {
  event: 'checkpoint';
  update: number;
  path: string;
}

export interface EvalEvent extends Base {
  event: 'eval';
  phase: string;
  done: number;
  total: number;
  candidates_per_s?: number;
}

export interface DoneEvent extends Base {
  event: 'done';
  result: string;
  wall_s: number;
}

export type TrainerErrorKind =
  | 'bad_manifest'
  | 'bad_rows'
  | 'diverged'
  | 'oom'
  | 'missing_model'
  | 'missing_dependency'
  | 'disk_full'
  | 'interrupted'
  | 'internal';

export interface ErrorEvent extends Base {
  event: 'error';
  kind: TrainerErrorKind;
  message: string;
  recoverable: boolean;
}

export type ProgressEvent = StartedEvent | StepEvent | WaitEvent | CheckpointEvent | EvalEvent | DoneEvent | ErrorEvent;

/**
 * Trainer exit codes (trainer-py/canary_trainer/exit_codes.py holds the same table).
 * Retrying helps only for FAILURE; INTERRUPTED means "resume me"; BUSY means "another live trainer
 * holds the output folder; nothing was done: try again later"; the others are final.
 */
export const TRAINER_EXIT = {
  OK: 0,
  FAILURE: 1,
  BAD_INPUT: 2,
  DIVERGED: 3,
  MISSING_MODEL: 4,
  OOM: 5,
  BUSY: 6,
  INTERRUPTED: 75,
} as const;

import { delimiter } from 'node:path';
import { TRAINER_DIR, trainerPython } from '../paths.js';
import type { TrainerCommand, TrainerJob, TrainerRunner } from './trainer-runner.js';

/**
 * Runs the trainer as a local Python process:
 *   PYTHONPATH=<trainer dir> <python> -m <module> run --manifest M --out DIR --resume
 * The interpreter is $CANARY_AUDIT_PYTHON (default /usr/bin/python3); $CANARY_AUDIT_TRAINER_PATH and
 * $CANARY_AUDIT_TRAINER_MODULE point at another trainer package (tests use a small stand-in).
 * `--resume` is always passed: a run that has a checkpoint continues from it, a fresh one starts.
 */
export interface LocalRunnerOptions {
  python?: string;
  /** Folder put first on PYTHONPATH; default trainer-py/ of this package. */
  trainerPath?: string;
  /** Python module run with -m; default canary_trainer. */
  module?: string;
}

export function localRunner(options: LocalRunnerOptions = {}): TrainerRunner {
  const python = options.python ?? trainerPython();
  // An empty variable counts as unset.
  const trainerPath = options.trainerPath ?? (process.env.CANARY_AUDIT_TRAINER_PATH || TRAINER_DIR);
  const module = options.module ?? (process.env.CANARY_AUDIT_TRAINER_MODULE || 'canary_trainer');
  return {
    name: 'local',
    command(job: TrainerJob): TrainerCommand {
      const inherited = process.env.PYTHONPATH;
      const env: Record<string, string> = {
        PYTHONPATH: inherited ? `${trainerPath}${delimiter}${inherited}` : trainerPath,
        PYTHONUNBUFFERED: '1',
        // An empty value hides every GPU: a CPU worker must not grab a GPU another worker owns.
        CUDA_VISIBLE_DEVICES: job.gpu ?? '',
      };
      if (job.threads !== null) env.CANARY_TRAINER_THREADS = String(job.threads);
      return {
        file: python,
        args: ['-m', module, 'run', '--manifest', job.manifestPath, '--out', job.outDir, '--resume'],
        env,
      };
    },
  };
}

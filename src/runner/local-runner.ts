import { delimiter } from 'node:path';
import { defaultArtifactsDir, TRAINER_DIR } from '../paths.js';
import { trainerPython, trainerPythonHint } from './python.js';
import { trainerModuleArgs, type TrainerCommand, type TrainerJob, type TrainerRunner } from './trainer-runner.js';
import { artifactsRootOfRun, cacheDirOf } from '../layout.js';

/**
 * Runs the trainer as a local Python process:
 *   PYTHONPATH=<trainer dir> <python> -m <module> run --manifest M --out DIR --resume
 * or, for a run over N GPUs, N ranks under torch's launcher (trainerModuleArgs), which gets
 * SIGTERM when the worker dies, even by kill -9, and passes it to every rank:
 *   ... <python> -c RANKS_LAUNCHER --standalone --nproc-per-node N -m <module> run ...
 *   (torch.distributed.run under PR_SET_PDEATHSIG)
 * The interpreter is trainerPython(): $CANARY_AUDIT_PYTHON, else the venv trainer-py/.venv that
 * `bash .ci/setup` builds from trainer-py/requirements.lock; $CANARY_AUDIT_TRAINER_PATH and
 * $CANARY_AUDIT_TRAINER_MODULE point at another trainer package (tests use a small stand-in).
 * `--resume` is always passed: a run that has a checkpoint continues from it, a fresh one starts.
 * $CANARY_TRAINER_CACHE (where the trainer keeps pretrained tiny bases) is set to the artifact
 * root's cache/ folder unless the worker's environment already sets it.
 */
export interface LocalRunnerOptions {
  python?: string;
  /** Folder put first on PYTHONPATH; default trainer-py/ of this package. */
  trainerPath?: string;
  /** Python module run with -m; default canary_trainer. */
  module?: string;
  /** The trainer's cache folder; default $CANARY_TRAINER_CACHE, else the artifact root's cache/. */
  cacheDir?: string;
}

/** Environment variable naming the trainer's cache of pretrained tiny bases. */
export const TRAINER_CACHE_ENV = 'CANARY_TRAINER_CACHE';

/**
 * The trainer's cache for a run: <artifacts>/cache, found from the run folder's place in the
 * artifact layout (<artifacts>/audits/<audit_id>/runs/<run_id>), so every worker on a shared
 * artifact store shares one cache and a base is pretrained once. A run folder outside that
 * layout falls back to the default artifact root.
 */
export function trainerCacheDir(runDir: string): string {
  return cacheDirOf(artifactsRootOfRun(runDir) ?? defaultArtifactsDir());
}

/** The host cache folder a run uses: an explicit option, then the environment, then the layout. */
export function hostCacheDir(job: { runDir: string }, cacheDir?: string): string {
  // An empty variable counts as unset.
  return cacheDir ?? (process.env[TRAINER_CACHE_ENV] || trainerCacheDir(job.runDir));
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
      // The launcher of several ranks checks it still has this parent once its death signal is armed.
      if ((job.ranks ?? 1) > 1) env.CANARY_TRAINER_PARENT_PID = String(process.pid);
      // Set only when the worker's own environment does not: the trainer then inherits that value.
      if (options.cacheDir !== undefined || !process.env[TRAINER_CACHE_ENV])
        env[TRAINER_CACHE_ENV] = hostCacheDir(job, options.cacheDir);
      const hint = trainerPythonHint(python);
      return {
        file: python,
        args: [
          ...trainerModuleArgs(module, job.ranks),
          'run',
          '--manifest',
          job.manifestPath,
          '--out',
          job.outDir,
          '--resume',
        ],
        env,
        ...(hint ? { hint } : {}),
      };
    },
  };
}

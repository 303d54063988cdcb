import { readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, posix } from 'node:path';
import { execa } from 'execa';
import { TRACKING_FILE, type TrackingSettings } from '../manifest/tracking.js';
import { hostCacheDir, TRAINER_CACHE_ENV } from './local-runner.js';
import { trainerModuleArgs, type TrainerCommand, type TrainerJob, type TrainerRunner } from './trainer-runner.js';

/**
 * Runs the trainer in the trainer image (docker/trainer.Dockerfile):
 *   docker run --rm --init --name canary-audit-<run_id> --user UID:GID [--gpus device=N]
 *     -v <run dir>:/work/run -w /work/run IMAGE
 *     python -m canary_trainer run --manifest /work/run/manifest.json --out /work/run/output --resume
 *     -v <artifacts>/cache:/work/cache -e CANARY_TRAINER_CACHE=/work/cache
 *     -v <HF_HOME or ~/.cache/huggingface>:/work/hf -e HF_HOME=/work/hf
 * The run folder is mounted (the manifest's paths are relative to it), and so is the trainer's
 * cache of pretrained tiny bases (the artifact root's cache/, or $CANARY_TRAINER_CACHE on the
 * host), so containers on one artifact store pretrain a base once. The run folder is mounted at
 * /work/run, not /run, because the NVIDIA container runtime mounts its own sockets under /run.
 * `--init` puts a real PID 1 in the container, so SIGTERM forwarded by `docker run` reaches the
 * trainer (which checkpoints) and orphaned children are reaped. The container name is fixed per
 * run, so a worker that takes over a run from a killed worker on the same host removes the
 * leftover container first.
 */
export interface DockerRunnerOptions {
  /** docker executable; default `docker` from PATH. */
  docker?: string;
  /** Trainer image; default $CANARY_AUDIT_TRAINER_IMAGE or canary-audit-trainer:latest. */
  image?: string;
  /** --user value; default this process's uid:gid, so output files belong to the worker's user. */
  user?: string | null;
  /**
   * Host folder mounted as the Hugging Face cache (HF_HOME in the container): default $HF_HOME, else
   * Hugging Face's own default ~/.cache/huggingface, where `models fetch` and the hub tools put
   * snapshots. Always mounted, because trainers load models offline; null mounts none.
   */
  hfHome?: string | null;
  /** Host folder mounted as the trainer's cache; default $CANARY_TRAINER_CACHE, else <artifacts>/cache. */
  cacheDir?: string;
}

export const DEFAULT_TRAINER_IMAGE = 'canary-audit-trainer:latest';
/** Mount point of the run folder inside the container. */
export const CONTAINER_RUN_DIR = '/work/run';
/** Mount point of the trainer's cache inside the container. */
export const CONTAINER_CACHE_DIR = '/work/cache';

export function containerName(runId: string): string {
  return `canary-audit-${runId}`;
}

/** The host's Hugging Face cache: $HF_HOME (empty counts as unset), else ~/.cache/huggingface. */
export function defaultHfHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.HF_HOME || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'huggingface');
}

/** Variables the trainer's tracking reads: the worker's --wandb, and W&B's own (mode, key, host). */
const TRACKING_ENV = [
  'CANARY_TRAINER_WANDB_PROJECT',
  'CANARY_TRAINER_WANDB_ENTITY',
  'CANARY_TRAINER_TENSORBOARD',
  'WANDB_MODE',
  'WANDB_API_KEY',
  'WANDB_BASE_URL',
];

/** The W&B settings of the audit a run folder belongs to (<audit>/runs/<run_id>/), if it asks for W&B. */
export function auditWandb(runDir: string): { project: string; entity?: string } | null {
  const path = join(runDir, '..', '..', TRACKING_FILE);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null; // the audit asks for no W&B
    throw new Error(
      `cannot read ${path}: ${(error as Error).message}; fix: make it readable, or plan the audit again`,
      {
        cause: error,
      },
    );
  }
  const raw = JSON.parse(text) as TrackingSettings;
  return typeof raw.wandb?.project === 'string' ? raw.wandb : null;
}

export function dockerRunner(options: DockerRunnerOptions = {}): TrainerRunner {
  const docker = options.docker ?? 'docker';
  const image = options.image ?? process.env.CANARY_AUDIT_TRAINER_IMAGE ?? DEFAULT_TRAINER_IMAGE;
  const user =
    options.user === undefined
      ? typeof process.getuid === 'function' && typeof process.getgid === 'function'
        ? `${process.getuid()}:${process.getgid()}`
        : null
      : options.user;
  const hfHome = options.hfHome === undefined ? defaultHfHome() : options.hfHome;

  return {
    name: 'docker',
    command(job: TrainerJob): TrainerCommand {
      const args = ['run', '--rm', '--init', '--name', containerName(job.runId)];
      if (user) args.push('--user', user);
      // Several devices: docker's --gpus parser needs the list quoted ("device=0,1").
      if (job.gpu !== null) args.push('--gpus', job.gpu.includes(',') ? `"device=${job.gpu}"` : `device=${job.gpu}`);
      // Ranks of one run talk through shared memory (NCCL, gloo): the host's IPC namespace.
      if ((job.ranks ?? 1) > 1) args.push('--ipc', 'host');
      args.push('-e', 'PYTHONUNBUFFERED=1');
      if (job.threads !== null) args.push('-e', `CANARY_TRAINER_THREADS=${job.threads}`, '--cpus', String(job.threads));
      // Names only: docker copies the values from its own environment, so tokens stay out of argv.
      // W&B tracking (trainer-py/canary_trainer/tracking.py) and W&B's own settings pass through too.
      for (const name of ['HF_TOKEN', 'HF_HUB_OFFLINE', ...TRACKING_ENV]) {
        if (process.env[name] !== undefined) args.push('-e', name);
      }
      // The container sees the run folder only: the audit's tracking.json travels as variables.
      if (process.env.CANARY_TRAINER_WANDB_PROJECT === undefined) {
        const wandb = auditWandb(job.runDir);
        if (wandb) args.push('-e', `CANARY_TRAINER_WANDB_PROJECT=${wandb.project}`);
        if (wandb?.entity) args.push('-e', `CANARY_TRAINER_WANDB_ENTITY=${wandb.entity}`);
      }
      if (hfHome) args.push('-v', `${hfHome}:/work/hf`, '-e', 'HF_HOME=/work/hf');
      args.push(
        '-v',
        `${hostCacheDir(job, options.cacheDir)}:${CONTAINER_CACHE_DIR}`,
        '-e',
        `${TRAINER_CACHE_ENV}=${CONTAINER_CACHE_DIR}`,
      );
      args.push('-v', `${job.runDir}:${CONTAINER_RUN_DIR}`, '-w', CONTAINER_RUN_DIR, image);
      args.push(
        'python',
        ...trainerModuleArgs('canary_trainer', job.ranks, false),
        'run',
        '--manifest',
        `${CONTAINER_RUN_DIR}/manifest.json`,
        '--out',
        `${CONTAINER_RUN_DIR}/output`,
        '--resume',
      );
      return { file: docker, args, env: {} };
    },
    async prepare(job: TrainerJob): Promise<void> {
      // Docker would create a missing mount source as root, which the --user trainer cannot write.
      await mkdir(hostCacheDir(job, options.cacheDir), { recursive: true });
      if (hfHome) await mkdir(hfHome, { recursive: true });
      // A container left by a worker that was killed -9 would still hold the run's output lock.
      await execa(docker, ['rm', '--force', containerName(job.runId)], { reject: false, stdio: 'ignore' });
    },
    async forceStop(job: TrainerJob): Promise<void> {
      await execa(docker, ['kill', containerName(job.runId)], { reject: false, stdio: 'ignore' });
    },
    toHostPath(path: string, job: TrainerJob): string {
      // The trainer names files by their container paths: /work/run/... is the run folder.
      const rel = posix.relative(CONTAINER_RUN_DIR, path);
      if (!posix.isAbsolute(path) || rel.startsWith('..')) return path;
      return join(job.runDir, ...rel.split('/'));
    },
  };
}

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { UserInputError, quoteValue } from '../errors.js';
import { writeFileAtomic } from '../fs/index.js';
import { PACKAGE_ROOT } from '../paths.js';

/**
 * `canary-audit slurm`: an sbatch script that runs a pool of workers against a given Redis, one
 * worker per array task. Slurm does the scheduling; the script only makes a worker behave well
 * inside a batch job:
 *
 *  - `--signal=B:USR1@S`: S seconds before the time limit Slurm sends SIGUSR1 to the batch shell,
 *    which forwards it to the worker; the worker stops its trainers (each checkpoints), hands their
 *    runs back to the queue without spending an attempt, and exits 75. `scancel --signal=USR1 JOB`
 *    reaches the worker directly (it runs as a job step under srun) with the same effect. On exit 75
 *    the script requeues its own job (`scontrol requeue`), so the pool comes back after preemption or
 *    a time limit; `--requeue` lets Slurm requeue it too (node failure, preemption in REQUEUE mode).
 *  - SIGTERM (scancel, preemption, the limit itself): the same hand-back, exit 0, no requeue by the
 *    script (Slurm requeues preempted jobs by itself).
 *  - HF_HOME is node-local (a folder on the node's own disk), optionally filled from a shared cache
 *    before the worker starts, so trainers do not read model weights over the network file system.
 *  - The Redis URL is never written into the script (it may carry a password): sbatch copies the
 *    submitting environment into the job, REDIS_URL included.
 */
export interface SlurmScriptOptions {
  artifactsDir: string;
  /** Array tasks (one worker each) and how many may run at once (`%` cap); null: no cap. */
  workers: number;
  maxRunning: number | null;
  /** GPUs per worker (`--gres=gpu:N`); 0: CPU workers. */
  gpusPerWorker: number;
  /** `--cpus-per-task`; CPU workers run one trainer slot per CPU. */
  cpusPerWorker: number;
  /** Memory per worker job, e.g. 64G; null: the partition's default. */
  mem: string | null;
  partition: string | null;
  account: string | null;
  /** `--time`, e.g. 1-00:00:00. */
  time: string;
  /** Seconds before the time limit the worker is told to hand its runs back. */
  signalS: number;
  /** Seconds a trainer gets to checkpoint before SIGKILL (the worker's --stop-grace-s). */
  stopGraceS: number;
  /** Node-local Hugging Face cache (shell words allowed: $TMPDIR, $USER). */
  hfHome: string;
  /** A shared Hugging Face cache copied into hfHome before the worker starts; null: none. */
  hfSeed: string | null;
  jobName: string;
  /** Folder for the jobs' output files. */
  logDir: string;
  /** Further `#SBATCH` lines, as given (e.g. --qos=high, --constraint=h100). */
  extra: string[];
  /** The node executable, its flags, and the CLI entry point the jobs run (this CLI, as it was started). */
  node: string;
  nodeArgs: string[];
  cli: string;
}

export const DEFAULT_SLURM = {
  workers: 1,
  time: '1-00:00:00',
  signalS: 300,
  stopGraceS: 120,
  hfHome: '${TMPDIR:-/tmp}/canary-audit-hf-${USER:-$(id -un)}',
  jobName: 'canary-audit-workers',
} as const;

/**
 * How the jobs start this CLI: the node executable, its flags (e.g. `--import tsx` when run from
 * the sources) and the entry point this process runs; dist/cli/main.js when that is unknown.
 */
export function currentCli(): { node: string; nodeArgs: string[]; cli: string } {
  const script = process.argv[1];
  if (script && /(^|[/\\])main\.(js|ts)$/.test(script))
    return { node: process.execPath, nodeArgs: [...process.execArgv], cli: resolve(script) };
  return { node: process.execPath, nodeArgs: [], cli: join(PACKAGE_ROOT, 'dist', 'cli', 'main.js') };
}

/** Single-quoted for bash: the value is taken literally. */
function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

export function slurmScript(o: SlurmScriptOptions): string {
  const sbatch = [
    `--job-name=${o.jobName}`,
    `--array=0-${o.workers - 1}${o.maxRunning !== null ? `%${o.maxRunning}` : ''}`,
    '--nodes=1',
    '--ntasks=1',
    `--cpus-per-task=${o.cpusPerWorker}`,
    ...(o.gpusPerWorker > 0 ? [`--gres=gpu:${o.gpusPerWorker}`] : []),
    ...(o.mem ? [`--mem=${o.mem}`] : []),
    ...(o.partition ? [`--partition=${o.partition}`] : []),
    ...(o.account ? [`--account=${o.account}`] : []),
    `--time=${o.time}`,
    `--signal=B:USR1@${o.signalS}`,
    '--requeue',
    '--open-mode=append',
    `--output=${join(o.logDir, '%x-%A_%a.out')}`,
    ...o.extra,
  ];
  const slots =
    o.gpusPerWorker > 0
      ? '--gpus "${CUDA_VISIBLE_DEVICES:?Slurm set no CUDA_VISIBLE_DEVICES: is --gres=gpu configured on this partition?}"'
      : '--cpu "${SLURM_CPUS_PER_TASK:-1}"';
  return `#!/bin/bash
# canary-audit worker pool: one worker per array task, against the Redis in $REDIS_URL.
# Written by \`canary-audit slurm\`; submit with REDIS_URL set (sbatch copies it into the job):
#   REDIS_URL=redis://:PASSWORD@HOST:6379 sbatch THIS_FILE
${sbatch.map((line) => `#SBATCH ${line}`).join('\n')}
set -u
: "\${REDIS_URL:?set REDIS_URL (the audit queue) in the environment sbatch runs in}"
export CANARY_AUDIT_HOME=${shellQuote(o.artifactsDir)}
# Node-local Hugging Face cache: model weights are read from this node's disk, offline.
export HF_HOME="${o.hfHome}"
export HF_HUB_OFFLINE=1
mkdir -p "$HF_HOME"
${o.hfSeed ? `# Fill it from the shared cache (files already there are kept).\ncp -a -n ${shellQuote(o.hfSeed)}/. "$HF_HOME"/ || echo "canary-audit: could not copy ${o.hfSeed.replace(/["$`\\]/g, '')} into $HF_HOME" >&2\n` : ''}echo "canary-audit: job \${SLURM_JOB_ID} (array \${SLURM_ARRAY_JOB_ID:-none} task \${SLURM_ARRAY_TASK_ID:-none}) on \${SLURMD_NODENAME:-?}, restart \${SLURM_RESTART_COUNT:-0}, HF_HOME=$HF_HOME"

# SIGUSR1 (--signal before the time limit): forwarded to the worker, which checkpoints, hands its
# runs back to the queue and exits 75. SIGTERM: forwarded as well (the worker exits 0).
pid=
stop=
trap 'stop=USR1; [ -n "$pid" ] && kill -USR1 "$pid" 2>/dev/null' USR1
trap 'stop=TERM; [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null' TERM
# As a job step, so \`scancel --signal=USR1 JOB\` reaches the worker itself.
srun --ntasks=1 --cpus-per-task=${o.cpusPerWorker} --kill-on-bad-exit=0 \\
  ${[o.node, ...o.nodeArgs, o.cli].map(shellQuote).join(' ')} worker ${slots} \\
  --artifacts ${shellQuote(o.artifactsDir)} --stop-grace-s ${o.stopGraceS} &
pid=$!
# A signal that came before the worker started is passed on now.
[ -n "$stop" ] && kill -"$stop" "$pid" 2>/dev/null
rc=0
while :; do
  wait "$pid"; rc=$?
  kill -0 "$pid" 2>/dev/null || break
done
if [ "$rc" -eq 75 ]; then
  # This task only: in an array, the array's job id names every task (the highest index's own id).
  self="\${SLURM_ARRAY_JOB_ID:+\${SLURM_ARRAY_JOB_ID}_\${SLURM_ARRAY_TASK_ID}}"
  self="\${self:-\${SLURM_JOB_ID}}"
  echo "canary-audit: the worker handed its runs back (time limit or preemption); requeueing job $self"
  scontrol requeue "$self"
fi
exit "$rc"
`;
}

/** Check what sbatch cannot: numbers that make no sense together. */
export function checkSlurmOptions(o: SlurmScriptOptions): void {
  if (o.maxRunning !== null && o.maxRunning > o.workers) {
    throw new UserInputError(
      `--max-running ${o.maxRunning} is more than --workers ${o.workers}; use at most ${o.workers}`,
      { field: '--max-running', code: 'E_BAD_FLAG' },
    );
  }
  if (o.stopGraceS + 30 > o.signalS) {
    throw new UserInputError(
      `--signal-s ${o.signalS} leaves no time to checkpoint: trainers get --stop-grace-s ${o.stopGraceS} s plus the hand-back; use --signal-s ${o.stopGraceS + 60} or more`,
      { field: '--signal-s', code: 'E_BAD_FLAG' },
    );
  }
  if (!/^(\d+-)?\d+(:\d+){0,2}$/.test(o.time)) {
    throw new UserInputError(`--time ${quoteValue(o.time)} is not a Slurm time; e.g. 30, 4:00:00 or 1-00:00:00`, {
      field: '--time',
      code: 'E_BAD_FLAG',
    });
  }
  if (!existsSync(o.cli)) {
    throw new UserInputError(`${o.cli} does not exist: build the CLI first (npm run build)`, { code: 'E_NO_FILE' });
  }
}

export async function writeSlurmScript(path: string, options: SlurmScriptOptions): Promise<void> {
  checkSlurmOptions(options);
  await mkdir(options.logDir, { recursive: true });
  await writeFileAtomic(path, slurmScript(options));
}

/**
 * `sbatch --parsable FILE` with REDIS_URL in its environment; the job id it prints. A refusal
 * (a partition that does not exist, a bad account) is bad input: one line made of sbatch's answer.
 */
export function submitSlurmScript(path: string, redisUrl: string, sbatch = 'sbatch'): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      sbatch,
      ['--parsable', path],
      { env: { ...process.env, REDIS_URL: redisUrl }, timeout: 60_000 },
      (error, stdout, stderr) => {
        if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
          reject(
            new UserInputError(
              `${sbatch} is not on PATH: run this on a Slurm login node, or write the script without --submit and sbatch it there`,
              { code: 'E_NO_SBATCH' },
            ),
          );
          return;
        }
        if (error) {
          reject(
            new UserInputError(
              `sbatch refused the job: ${sbatchAnswer(stderr) || error.message.split('\n')[0]}; check the flags against \`sinfo -s\` (partitions) and \`sacctmgr show assoc user=$USER\` (accounts)`,
              { code: 'E_SBATCH' },
            ),
          );
          return;
        }
        const id = stdout.trim().split(';')[0] ?? '';
        if (!/^\d+$/.test(id)) {
          reject(new Error(`sbatch printed no job id: ${stdout.trim().slice(0, 200)}`));
          return;
        }
        resolve(id);
      },
    );
  });
}

/** sbatch's error lines joined into one: `invalid partition specified: nope (Batch job submission failed: ...)`. */
export function sbatchAnswer(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.replace(/^sbatch:\s*(error:\s*)?/, '').trim())
    .filter(Boolean);
  if (lines.length === 0) return '';
  const [first, ...rest] = lines;
  return rest.length > 0 ? `${first} (${rest.join('; ')})` : (first as string);
}

import { join, resolve } from 'node:path';
import {
  cliCommand,
  currentCli,
  shellWord,
  DEFAULT_SLURM,
  submitSlurmScript,
  writeSlurmScript,
  type SlurmScriptOptions,
} from '../app/index.js';
import { requireRedisTarget } from '../queue/index.js';
import { ARTIFACTS_OPTION, REDIS_OPTION, artifactsFrom } from './queue-options.js';
import { intOption, stringOption, type Command } from './command.js';

/**
 * `canary-audit slurm`: write (and with --submit, submit) an sbatch script that runs a pool of
 * workers against a Redis, one per array task (src/app/slurm.ts says what the script does).
 */
export const command: Command = {
  name: 'slurm',
  summary: 'Write (and with --submit, submit) an sbatch script that runs a worker pool on a Slurm cluster.',
  usage:
    '[--submit] [--workers N] [--max-running K] [--gpus-per-worker G] [--cpus-per-worker C] [--partition P] [--time T] [--redis URL] [--artifacts DIR] [--out FILE]',
  description: `
The script is a job array of N tasks (--array=0-(N-1)%K), each one \`canary-audit worker\` on one
node with G GPUs (--gres=gpu:G; 0 = CPU workers with one trainer per CPU), against the Redis in
REDIS_URL (never written into the script: sbatch copies it from the environment). HF_HOME is on the
node's own disk (--hf-home), filled from --hf-seed when given.
Time limits and preemption: --signal-s seconds before the limit Slurm sends SIGUSR1 (and
\`scancel --signal=USR1 JOB\` does the same at once); the worker checkpoints every trainer, hands
its runs back to the queue without spending an attempt, exits 75, and the script requeues the job
(--requeue). SIGTERM: the same hand-back without the requeue.
Without --submit the script is written and its path printed: \`REDIS_URL=... sbatch FILE\`.
Exit codes: 0 written (and submitted), 2 bad flags or sbatch refused the job (its answer in one line).`,
  options: {
    ...REDIS_OPTION,
    ...ARTIFACTS_OPTION,
    submit: { type: 'boolean', description: 'Submit the script with sbatch and print the job id.' },
    out: {
      type: 'string',
      value: 'FILE',
      description: 'Where to write the script. Default: <artifacts>/slurm/<job-name>.sbatch.',
    },
    workers: {
      type: 'string',
      value: 'N',
      description: `Array tasks, one worker each. Default ${DEFAULT_SLURM.workers}.`,
    },
    'max-running': {
      type: 'string',
      value: 'K',
      description: "At most K tasks at once (the array's % cap). Default: no cap.",
    },
    'gpus-per-worker': {
      type: 'string',
      value: 'G',
      description: 'GPUs per worker (--gres=gpu:G); 0 for CPU workers. Default 0.',
    },
    'cpus-per-worker': {
      type: 'string',
      value: 'C',
      description: 'CPUs per worker (--cpus-per-task). Default: 8 per GPU, else 1.',
    },
    mem: {
      type: 'string',
      value: 'SIZE',
      description: "Memory per worker (--mem), e.g. 256G. Default: the partition's.",
    },
    partition: {
      type: 'string',
      value: 'P',
      description: "Slurm partition. Default: the cluster's default partition.",
    },
    account: { type: 'string', value: 'A', description: 'Slurm account to charge.' },
    time: { type: 'string', value: 'T', description: `Time limit per job (--time). Default ${DEFAULT_SLURM.time}.` },
    'signal-s': {
      type: 'string',
      value: 'S',
      description: `Seconds before the time limit the worker hands its runs back (--signal=B:USR1@S). Default ${DEFAULT_SLURM.signalS}.`,
    },
    'stop-grace-s': {
      type: 'string',
      value: 'S',
      description: `Seconds a trainer gets to checkpoint before SIGKILL. Default ${DEFAULT_SLURM.stopGraceS}.`,
    },
    'hf-home': {
      type: 'string',
      value: 'DIR',
      description: `Node-local Hugging Face cache (shell variables allowed). Default ${DEFAULT_SLURM.hfHome}.`,
    },
    'hf-seed': {
      type: 'string',
      value: 'DIR',
      description:
        'Shared Hugging Face cache copied into --hf-home before the worker starts (files already there are kept).',
    },
    'job-name': { type: 'string', value: 'NAME', description: `Slurm job name. Default ${DEFAULT_SLURM.jobName}.` },
    sbatch: {
      type: 'string',
      value: 'ARG',
      multiple: true,
      description: 'A further #SBATCH line, e.g. --sbatch --qos=high (repeatable).',
    },
  },
  positionals: [0, 0],
  async run(args) {
    const artifactsDir = artifactsFrom(args);
    const redisFlag = stringOption(args, 'redis');
    const redisUrl = redisFlag ?? process.env.REDIS_URL;
    const submit = args.values.submit === true;
    // Parsed for its one-line errors; only --submit needs it (sbatch passes it to the jobs).
    const target = submit || redisUrl !== undefined ? requireRedisTarget(redisFlag, 'slurm') : null;
    const gpus = intOption(args, 'gpus-per-worker', 0, 0);
    const jobName = stringOption(args, 'job-name') ?? DEFAULT_SLURM.jobName;
    const maxRunning = stringOption(args, 'max-running');
    const extra = args.values.sbatch;
    const options: SlurmScriptOptions = {
      artifactsDir,
      workers: intOption(args, 'workers', DEFAULT_SLURM.workers, 1),
      maxRunning: maxRunning === undefined ? null : intOption(args, 'max-running', 1, 1),
      gpusPerWorker: gpus,
      cpusPerWorker: intOption(args, 'cpus-per-worker', gpus > 0 ? 8 * gpus : 1, 1),
      mem: stringOption(args, 'mem') ?? null,
      partition: stringOption(args, 'partition') ?? null,
      account: stringOption(args, 'account') ?? null,
      time: stringOption(args, 'time') ?? DEFAULT_SLURM.time,
      signalS: intOption(args, 'signal-s', DEFAULT_SLURM.signalS, 1),
      stopGraceS: intOption(args, 'stop-grace-s', DEFAULT_SLURM.stopGraceS, 0),
      hfHome: stringOption(args, 'hf-home') ?? DEFAULT_SLURM.hfHome,
      hfSeed: stringOption(args, 'hf-seed') === undefined ? null : resolve(stringOption(args, 'hf-seed') as string),
      jobName,
      logDir: join(artifactsDir, 'slurm', 'logs'),
      extra: Array.isArray(extra) ? extra : [],
      ...currentCli(),
    };
    const out = resolve(stringOption(args, 'out') ?? join(artifactsDir, 'slurm', `${jobName}.sbatch`));
    await writeSlurmScript(out, options);
    process.stdout.write(`wrote ${out}\n`);
    if (!submit) {
      process.stdout.write(`submit it with REDIS_URL set: REDIS_URL=redis://... sbatch ${out}\n`);
      return 0;
    }
    const jobId = await submitSlurmScript(out, redisUrl as string);
    process.stdout.write(
      `submitted job ${jobId}: ${options.workers} worker${options.workers === 1 ? '' : 's'} against ${target?.redacted ?? ''}; logs in ${options.logDir}\n` +
        `  watch: ${cliCommand()} status --workers${process.env.REDIS_URL ? '' : ` --redis ${shellWord(target?.redacted ?? 'URL')}`} (each worker shows its Slurm job and node)\n`,
    );
    return 0;
  },
};

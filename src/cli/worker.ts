import { existsSync } from 'node:fs';
import { UserInputError } from '../errors.js';
import { log } from '../log.js';
import { assertRedisReachable, passwordInFlagWarning, queueConnection, requireRedisTarget } from '../queue/index.js';
import {
  SHUTDOWN_MARGIN_MS,
  type ShutdownReport,
  WorkerPool,
  describeSlot,
  shortLockWarning,
} from '../worker/index.js';
import {
  ARTIFACTS_OPTION,
  REDIS_OPTION,
  SLOT_OPTIONS,
  TIMING_OPTIONS,
  artifactsFrom,
  tuningFrom,
} from './queue-options.js';
import { runnerFrom, slotsFrom } from './worker-options.js';
import { stringOption, type Command } from './command.js';
import { WANDB_PROJECT_ENV, WORKER_WANDB_OPTION, wandbFrom } from './tracking-option.js';

/** Exit code after SIGUSR1: every run was checkpointed and handed back; a batch job may requeue itself. */
export const WORKER_EXIT_HANDED_BACK = 75;

/**
 * `canary-audit worker`: run queued fine-tuning jobs on this host until SIGTERM/SIGINT, one BullMQ
 * worker per GPU (or per CPU share), concurrency 1 each.
 */
export const command: Command = {
  name: 'worker',
  summary: 'Run queued fine-tuning jobs: one worker per GPU (or N CPU workers).',
  usage: '[--gpus 0,1,...|--cpu N] [--runner local|docker] [--redis URL] [--artifacts DIR] [--wandb PROJECT]',
  description: `
Each worker takes one run at a time and starts the trainer as a child process (CUDA_VISIBLE_DEVICES
set to its GPU), relays its progress to Redis (\`canary-audit status\`) and records where the result
is. A crash is retried with backoff; a bad manifest, divergence, a missing model or OOM fail the run
for good (output/failure.json) without holding up the rest of the audit.
SIGTERM or SIGINT: every trainer checkpoints and exits, its run goes back to the front of the queue
(no attempt spent), and the process exits within --stop-grace-s + ${SHUTDOWN_MARGIN_MS / 1000} s, whatever Redis does:
when Redis is gone or does not answer, the worker does not wait for it (its runs go back to the queue
when their locks expire). A second signal exits at once (local trainers still checkpoint: the kernel
tells them their parent died).
SIGUSR1 (what \`canary-audit slurm\` job scripts send before a time limit or on \`scancel --signal=USR1\`):
the same, then exit code ${WORKER_EXIT_HANDED_BACK}, which tells the job script to requeue itself.
A worker killed with SIGKILL loses its runs after --lock-ms; another worker resumes them from their
newest checkpoint. Exit codes: 0 stopped on SIGTERM/SIGINT, ${WORKER_EXIT_HANDED_BACK} stopped on SIGUSR1, 1 Redis unreachable,
2 bad flags.`,
  options: { ...SLOT_OPTIONS, ...REDIS_OPTION, ...ARTIFACTS_OPTION, ...TIMING_OPTIONS, ...WORKER_WANDB_OPTION },
  positionals: [0, 0],
  async run(args) {
    const target = requireRedisTarget(stringOption(args, 'redis'), 'worker', stringOption(args, 'redis-password-file'));
    const argvPassword = passwordInFlagWarning(stringOption(args, 'redis'), 'worker');
    if (argvPassword) process.stderr.write(`${argvPassword}\n`);
    const artifactsDir = artifactsFrom(args);
    if (!existsSync(artifactsDir)) {
      throw new UserInputError(
        `artifact root ${artifactsDir} does not exist; mount the shared artifact store there or pass --artifacts DIR (or set CANARY_AUDIT_HOME)`,
        { field: '--artifacts', code: 'E_NO_ARTIFACTS' },
      );
    }
    const slots = slotsFrom(args);
    const runner = runnerFrom(args);
    const tuning = tuningFrom(args);
    // `run` starts its own workers with the lock it chooses; a worker the user starts hears about a short one.
    const short = shortLockWarning(tuning.lockMs);
    if (short) process.stderr.write(`canary-audit worker: warning: ${short}\n`);
    // The trainers inherit the worker's environment (the docker runner forwards the variable).
    const wandbProject = wandbFrom(args, true);
    if (wandbProject !== undefined) process.env[WANDB_PROJECT_ENV] = wandbProject;
    await assertRedisReachable(target);
    const pool = await WorkerPool.start({ conn: queueConnection(target), artifactsDir, runner, slots, tuning });
    process.stderr.write(
      `canary-audit worker: ${slots.map(describeSlot).join(', ')} on ${pool.host}, runner ${runner.name}, ${target.redacted}; artifacts ${artifactsDir}\n`,
    );
    let exitCode = 0;
    const bound = tuning.stopGraceMs + SHUTDOWN_MARGIN_MS;
    await new Promise<void>((resolve) => {
      let signals = 0;
      const onSignal = (signal: NodeJS.Signals) => {
        if (signal === 'SIGUSR1') exitCode = WORKER_EXIT_HANDED_BACK;
        signals += 1;
        if (signals > 1) {
          // Local trainers are told by the kernel (parent death): they checkpoint and exit by themselves.
          process.stderr.write(`canary-audit worker: second signal (${signal}): exiting now\n`);
          process.exit(1);
        }
        log.info({ signal, running: pool.activeRuns() }, 'stopping: trainers checkpoint, runs go back to the queue');
        // The pool's shutdown is bounded step by step; this is the bound of last resort.
        setTimeout(() => {
          process.stderr.write(
            `canary-audit worker: not stopped within ${bound / 1000} s of ${signal} (--stop-grace-s + ${SHUTDOWN_MARGIN_MS / 1000} s): exiting now\n`,
          );
          process.exit(1);
        }, bound).unref();
        pool.shutdown().then(
          (report) => {
            process.stderr.write(`${shutdownLine(report, tuning.lockMs)}\n`);
            resolve();
          },
          (error: unknown) => {
            log.error({ err: error }, 'shutdown failed');
            resolve();
          },
        );
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
      process.on('SIGUSR1', onSignal);
    });
    log.info({ exit: exitCode }, 'worker stopped');
    return exitCode;
  },
};

/** The one line a stopped worker prints: how long it took, and what it left to the lock's expiry. */
export function shutdownLine(report: ShutdownReport, lockMs: number): string {
  const took = `canary-audit worker: stopped in ${(report.ms / 1000).toFixed(1)} s`;
  if (report.forced === null) return `${took}; every run handed back to the queue`;
  const runs = report.notHandedBack;
  const left =
    runs.length === 0
      ? 'no run was running'
      : `${runs.length} run${runs.length > 1 ? 's' : ''} not handed back (${runs.join(', ')}) go${runs.length > 1 ? '' : 'es'} back to the queue when ${runs.length > 1 ? 'their locks expire' : 'its lock expires'} (--lock-ms ${lockMs})`;
  return `${took}; ${report.forced}: connections force-closed; ${left}`;
}

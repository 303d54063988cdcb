import { appendFileSync, closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { execa } from 'execa';
import type { DoneEvent, ErrorEvent, ProgressEvent } from '../contracts/progress.js';
import { classifyExit, type ExitStatus } from './exit-status.js';
import { LineSplitter, parseProgressLine } from './progress-protocol.js';
import type { TrainerJob, TrainerRunner } from './trainer-runner.js';

/**
 * Start the trainer for one run as a child process and follow its stdout protocol. The worker's
 * event loop only relays events, so BullMQ keeps renewing the job lock however busy the GPU is.
 * stderr goes straight to a log file in the run's output folder (appended across attempts).
 */
export interface TrainerRunOptions {
  runner: TrainerRunner;
  job: TrainerJob;
  /** File the trainer's stderr is appended to. */
  stderrLog: string;
  /** After stop(): SIGTERM, then SIGKILL (and the runner's forceStop) after this many ms. */
  stopGraceMs: number;
  onEvent(event: ProgressEvent): void;
  /** A stdout line that is not a protocol event; default: noted in the stderr log. */
  onBadLine?(line: string, reason: string): void;
}

export interface TrainerOutcome extends ExitStatus {
  exitCode: number | null;
  signal: string | null;
  wallMs: number;
  done: DoneEvent | null;
  lastError: ErrorEvent | null;
}

export interface RunningTrainer {
  readonly pid: number | undefined;
  /** Ask the trainer to checkpoint and exit; idempotent. */
  stop(): void;
  readonly finished: Promise<TrainerOutcome>;
}

export async function startTrainer(options: TrainerRunOptions): Promise<RunningTrainer> {
  const { runner, job, stderrLog } = options;
  await mkdir(dirname(stderrLog), { recursive: true });
  await mkdir(job.outDir, { recursive: true });
  await runner.prepare?.(job);
  const logStart = sizeOf(stderrLog);
  const command = runner.command(job);
  const started = Date.now();
  const subprocess = execa(command.file, command.args, {
    env: trainerEnv(command.env),
    extendEnv: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: { file: stderrLog, append: true },
    buffer: false,
    reject: false,
    // The trainer must not outlive a worker that exits normally; after kill -9 the trainer
    // notices its parent is gone and exits by itself (75).
    cleanup: true,
    forceKillAfterDelay: Math.max(1, options.stopGraceMs),
  });

  let done: DoneEvent | null = null;
  let lastError: ErrorEvent | null = null;
  let stopRequested = false;
  let forceTimer: NodeJS.Timeout | undefined;
  let forceStopped = false;
  const splitter = new LineSplitter();
  const badLine =
    options.onBadLine ??
    ((line: string, reason: string) => {
      try {
        appendFileSync(
          stderrLog,
          `[canary-audit] stdout line is not a progress event (${reason}): ${line.slice(0, 500)}\n`,
        );
      } catch {
        // a full or failing disk: the note is lost, the run goes on (the trainer reports its own failure)
      }
    });
  const handleLine = (line: string) => {
    const parsed = parseProgressLine(line);
    if (!parsed.ok) {
      badLine(parsed.line, parsed.reason);
      return;
    }
    if (parsed.event.event === 'done') done = parsed.event;
    if (parsed.event.event === 'error') lastError = parsed.event;
    options.onEvent(parsed.event);
  };
  subprocess.stdout?.on('data', (chunk: Buffer) => {
    for (const line of splitter.push(chunk)) handleLine(line);
  });

  const finished = (async (): Promise<TrainerOutcome> => {
    const result = await subprocess;
    for (const line of splitter.end()) handleLine(line);
    if (forceTimer) clearTimeout(forceTimer);
    // execa's SIGKILL and the forceStop timer share the grace period: when the kill ends the process
    // first, the timer was just cleared, yet the runner may still hold something (a container that
    // outlives its killed `docker run` client).
    if (stopRequested && result.signal === 'SIGKILL' && !forceStopped) await runner.forceStop?.(job);
    const exitCode = typeof result.exitCode === 'number' ? result.exitCode : null;
    const signal = result.signal ?? null;
    const spawnFailed = result.failed && exitCode === null && signal === null && !result.isTerminated;
    const status = classifyExit({
      exitCode,
      signal,
      stopRequested,
      lastError,
      sawDone: done !== null,
      stderrTail: readTail(stderrLog, logStart),
      ...(spawnFailed
        ? {
            spawnError: `cannot start ${command.file}: ${result.shortMessage ?? result.message}${command.hint ? ` (${command.hint})` : ''}`,
          }
        : {}),
    });
    return { ...status, exitCode, signal, wallMs: Date.now() - started, done, lastError };
  })();

  return {
    pid: subprocess.pid,
    stop() {
      if (stopRequested) return;
      stopRequested = true;
      subprocess.kill('SIGTERM');
      if (runner.forceStop) {
        forceTimer = setTimeout(
          () => {
            forceStopped = true;
            void runner.forceStop?.(job);
          },
          Math.max(1, options.stopGraceMs),
        );
      }
    },
    finished,
  };
}

/**
 * The worker's environment minus what the trainer must not see: REDIS_URL may carry the queue's
 * password, and a trainer never talks to Redis. The runner's own variables come on top.
 */
const WITHHELD = ['REDIS_URL', 'REDIS_PASSWORD'];

function trainerEnv(own: Record<string, string | undefined> | undefined): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of WITHHELD) delete env[name];
  return { ...env, ...own };
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The last few lines the trainer wrote to stderr during this attempt, on one line. */
function readTail(path: string, from: number, maxBytes = 2048, maxLines = 4): string {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const size = fstatSync(fd).size;
    const start = Math.max(from, size - maxBytes);
    if (size <= start) return '';
    const buffer = Buffer.alloc(size - start);
    readSync(fd, buffer, 0, buffer.length, start);
    return buffer
      .toString('utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('[canary-audit]'))
      .slice(-maxLines)
      .join(' | ');
  } catch {
    return '';
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

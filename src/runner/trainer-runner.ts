/**
 * How a worker launches the trainer for one run. A runner only builds a command (an argument array:
 * never a shell string) and knows how to clear up after a dead predecessor; starting, watching and
 * stopping the process is the same for every runner (run-trainer.ts).
 */
export interface TrainerJob {
  runId: string;
  /** Absolute run folder (holds manifest.json and rows.jsonl). */
  runDir: string;
  /** Absolute manifest.json. */
  manifestPath: string;
  /** Absolute output folder (the trainer's --out). */
  outDir: string;
  /** GPU index to expose ("0,1,2,3" for a run over several), or null for a CPU run (GPUs hidden). */
  gpu: string | null;
  /** Trainer processes (one per GPU) started by torch.distributed.run; absent or 1: one plain process. */
  ranks?: number;
  /** Intra-op threads for a CPU run (CANARY_TRAINER_THREADS); null lets the trainer choose. */
  threads: number | null;
}

export interface TrainerCommand {
  file: string;
  args: string[];
  /** Added to the worker's environment. */
  env: Record<string, string>;
  /** What to do about it, said with a failure to start the command (e.g. how to build the venv). */
  hint?: string;
}

export interface TrainerRunner {
  readonly name: string;
  command(job: TrainerJob): TrainerCommand;
  /** Before a start: remove what a killed worker may have left (e.g. a container). */
  prepare?(job: TrainerJob): Promise<void>;
  /** After the stop grace period: make sure nothing of the run keeps running. */
  forceStop?(job: TrainerJob): Promise<void>;
  /** Map a path the trainer reported (e.g. inside a container) to this host's file system. */
  toHostPath?(path: string, job: TrainerJob): string;
}

/**
 * torch's launcher for a run over several ranks, started under a parent-death signal: Linux's
 * PR_SET_PDEATHSIG makes the kernel send the launcher SIGTERM when the process that started it
 * dies, even by kill -9, and on SIGTERM the launcher does what it always does: pass it to every rank
 * (which stop after the same update, checkpoint and exit 75), SIGKILL any rank left after 30 s, and
 * exit. So no rank outlives its worker. A rank that outlives the launcher itself notices its parent
 * changed (the trainer's parent watch). CANARY_TRAINER_PARENT_PID (set by the local runner) closes
 * the race of a worker that died before the signal was armed: the launcher then exits 75 at once.
 */
export const RANKS_LAUNCHER = [
  'import os, runpy, signal, sys',
  'if sys.platform.startswith("linux"):',
  '    import ctypes',
  '    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG',
  'parent = os.environ.pop("CANARY_TRAINER_PARENT_PID", "")',
  'if parent and os.getppid() != int(parent):',
  '    sys.exit(75)',
  'runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)',
].join('\n');

/**
 * The Python arguments that start the trainer module: `-m MODULE` for one process, and for a run
 * over several GPUs torch's own launcher (under RANKS_LAUNCHER), one rank per GPU on this host:
 *   -c RANKS_LAUNCHER --standalone --nproc-per-node N -m MODULE
 * which is `python -m torch.distributed.run --standalone --nproc-per-node N -m MODULE` tied to the
 * life of its parent (`--standalone`: a private rendezvous on a free local port, so runs sharing a
 * host never meet). `tied: false` gives the plain `-m torch.distributed.run` (in a container, whose
 * life docker ties to nothing on the host: the docker runner removes it instead).
 */
export function trainerModuleArgs(module: string, ranks: number | undefined, tied = true): string[] {
  if (ranks === undefined || ranks <= 1) return ['-m', module];
  return [
    ...(tied ? ['-c', RANKS_LAUNCHER] : ['-m', 'torch.distributed.run']),
    '--standalone',
    '--nproc-per-node',
    String(ranks),
    '-m',
    module,
  ];
}

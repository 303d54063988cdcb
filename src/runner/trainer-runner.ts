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
 * The Python arguments that start the trainer module: `-m MODULE` for one process, and for a run
 * over several GPUs torch's own launcher, one rank per GPU on this host:
 *   -m torch.distributed.run --standalone --nproc-per-node N -m MODULE
 * (`--standalone`: a private rendezvous on a free local port, so runs sharing a host never meet).
 */
export function trainerModuleArgs(module: string, ranks: number | undefined): string[] {
  if (ranks === undefined || ranks <= 1) return ['-m', module];
  return ['-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', String(ranks), '-m', module];
}

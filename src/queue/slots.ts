import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { UserInputError, quoteValue } from '../errors.js';
import type { WorkerSlot } from './run-processor.js';

/**
 * Worker slots: one BullMQ worker (concurrency 1) per slot. A GPU slot pins its trainer to one GPU
 * with CUDA_VISIBLE_DEVICES; a CPU slot hides the GPUs and gives the trainer a share of the cores.
 */
export function gpuSlots(spec: string): WorkerSlot[] {
  const ids = spec.split(',').map((s) => s.trim());
  const seen = new Set<string>();
  for (const id of ids) {
    // Indices or GPU UUIDs (GPU-xxxxxxxx...), as CUDA_VISIBLE_DEVICES accepts them.
    if (!/^(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-zA-Z/-]+)$/.test(id)) {
      throw new UserInputError(`${quoteValue(id)} in ${quoteValue(spec)} is not a GPU index or UUID; e.g. --gpus 0,1`, {
        field: '--gpus',
        code: 'E_BAD_FLAG',
      });
    }
    if (seen.has(id)) {
      throw new UserInputError(`${quoteValue(spec)} lists GPU ${id} twice; one worker per GPU`, { field: '--gpus', code: 'E_BAD_FLAG' });
    }
    seen.add(id);
  }
  return ids.map((gpu) => ({ gpu, threads: null }));
}

export function cpuSlots(count: number, cores: number = availableParallelism()): WorkerSlot[] {
  const threads = Math.max(1, Math.floor(cores / count));
  return Array.from({ length: count }, () => ({ gpu: null, threads }));
}

/**
 * CPU slots when the user names none: one trainer per core, one thread each. The tiny model's
 * matrices are too small for intra-op threads to pay: the quickstart took 6m48s with one
 * two-thread worker and 3m05s with two one-thread workers on the same 2-core machine (its base
 * model pretrained in 154 s with two threads, 61 s with one; docs/operations.md).
 */
export function defaultCpuSlotCount(cores: number = availableParallelism()): number {
  return Math.max(1, cores);
}

/** GPU indices nvidia-smi reports, or [] when there is no NVIDIA driver. */
export function detectGpus(): string[] {
  try {
    const out = execFileSync('nvidia-smi', ['--query-gpu=index', '--format=csv,noheader'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
    });
    return out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => /^\d+$/.test(l));
  } catch {
    return [];
  }
}

export function describeSlot(slot: WorkerSlot): string {
  return slot.gpu === null ? `cpu(${slot.threads ?? '?'} threads)` : `gpu ${slot.gpu}`;
}

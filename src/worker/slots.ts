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
      throw new UserInputError(`${quoteValue(spec)} lists GPU ${id} twice; one worker per GPU`, {
        field: '--gpus',
        code: 'E_BAD_FLAG',
      });
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

/**
 * Which run holds each slot of this host. A run over several slots (training.gpus) takes them all
 * at once or none (`take`): it never holds some while it waits for the others, so two such runs
 * can never each hold half of what both need. So that such a run is not starved by one-slot runs
 * (which would take each slot as it frees, so N are never free at once), a run that found too few
 * free reserves the host (`reserve`): until it has its slots, or the reservation lapses (it was not
 * fetched again here within `holdMs`: another host took it, or it was cancelled), no other run takes
 * a slot. One reservation at a time, the first run's.
 */
export class SlotBook {
  private readonly holders: (string | null)[];
  private reservation: { runId: string; count: number; until: number } | null = null;

  constructor(readonly size: number) {
    this.holders = Array.from({ length: size }, () => null);
  }

  holder(index: number): string | null {
    return this.holders[index] ?? null;
  }

  /**
   * The slots for a run of `count` slots fetched by slot `primary`: that slot and the lowest-numbered
   * free others, all taken now; null (nothing taken) when the primary is held or too few are free.
   */
  take(primary: number, count: number, runId: string, now: number = Date.now()): number[] | null {
    if (this.holders[primary] !== null) return null;
    const reserved = this.reservedBy(now);
    if (reserved !== null && reserved !== runId) return null;
    const others = this.holders.flatMap((h, i) => (h === null && i !== primary ? [i] : []));
    if (others.length < count - 1) return null;
    const taken = [primary, ...others.slice(0, count - 1)].sort((a, b) => a - b);
    for (const i of taken) this.holders[i] = runId;
    if (reserved === runId) this.reservation = null;
    return taken;
  }

  /**
   * A run of `count` slots that `take` refused holds the host for itself for `holdMs` (renewed each
   * time it asks again). Ignored for a one-slot run, for a run larger than the host, and while
   * another run's reservation stands.
   */
  reserve(runId: string, count: number, holdMs: number, now: number = Date.now()): void {
    if (count <= 1 || count > this.size) return;
    const reserved = this.reservedBy(now);
    if (reserved !== null && reserved !== runId) return;
    this.reservation = { runId, count, until: now + holdMs };
  }

  /** The run the host is reserved for, or null. */
  reservedBy(now: number = Date.now()): string | null {
    if (this.reservation !== null && this.reservation.until <= now) this.reservation = null;
    return this.reservation?.runId ?? null;
  }

  release(taken: number[]): void {
    for (const i of taken) this.holders[i] = null;
  }

  free(): number {
    return this.holders.filter((h) => h === null).length;
  }
}

/** One slot standing for the slots of a gang: their GPUs listed together, one trainer rank each. */
export function gangSlot(slots: WorkerSlot[]): WorkerSlot {
  const first = slots[0];
  if (!first) throw new Error('a gang needs at least one slot');
  if (slots.length === 1) return first;
  const gpus = slots.map((s) => s.gpu);
  return { gpu: gpus.every((g) => g !== null) ? gpus.join(',') : null, threads: first.threads, ranks: slots.length };
}

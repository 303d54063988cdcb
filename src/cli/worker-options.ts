import { UserInputError, quoteValue } from '../errors.js';
import { cpuSlots, defaultCpuSlotCount, detectGpus, gpuSlots, type WorkerSlot } from '../worker/index.js';
import { createRunner, type TrainerRunner } from '../runner/index.js';
import { intOption, stringOption, type ParsedArgs } from './command.js';

/*
 * The worker slots and the trainer runner from the flags of the commands that run trainers (worker,
 * run), apart from queue-options.ts: status, submit and cancel load those flags without the worker
 * and runner modules (execa, the GPU probe) behind these.
 */

export function slotsFrom(args: ParsedArgs): WorkerSlot[] {
  const gpus = stringOption(args, 'gpus');
  const cpu = stringOption(args, 'cpu');
  if (gpus !== undefined && cpu !== undefined) {
    throw new UserInputError('--gpus and --cpu exclude each other: a host runs GPU workers or CPU workers', {
      code: 'E_BAD_FLAG',
    });
  }
  if (gpus !== undefined) return checkedGpuSlots(gpus, stringOption(args, 'runner') ?? 'local');
  if (cpu !== undefined) return cpuSlots(intOption(args, 'cpu', 1, 1));
  const detected = detectGpus();
  return detected.length > 0 ? gpuSlots(detected.join(',')) : cpuSlots(defaultCpuSlotCount());
}

/**
 * --gpus on a host where nvidia-smi lists no GPU: with the local runner the trainers would run on
 * the CPU with torch's default thread count, so their scores would differ from --cpu runs'. Refused.
 * The docker runner's GPUs may be visible only to the engine, not to this process (a worker in a
 * container without nvidia-smi): a warning only, since pinning threads there would also cap a real
 * GPU trainer's container (--cpus).
 */
export function checkedGpuSlots(spec: string, runner: string, detected: string[] = detectGpus()): WorkerSlot[] {
  const slots = gpuSlots(spec);
  if (detected.length > 0) return slots;
  if (runner !== 'docker') {
    throw new UserInputError(
      `GPU ${quoteValue(spec)} asked for, but nvidia-smi lists no GPU on this host; use --cpu N for CPU workers (each trainer then runs with a fixed thread count, so its scores match other CPU runs)`,
      { field: '--gpus', code: 'E_NO_GPU' },
    );
  }
  process.stderr.write(
    `canary-audit: warning: --gpus ${spec}: nvidia-smi lists no GPU here; if the trainer containers find none either, they run on the CPU with torch's default threads (use --cpu N for CPU runs)\n`,
  );
  return slots;
}

export function runnerFrom(args: ParsedArgs): TrainerRunner {
  const image = stringOption(args, 'image');
  return createRunner(stringOption(args, 'runner') ?? 'local', image !== undefined ? { image } : {});
}

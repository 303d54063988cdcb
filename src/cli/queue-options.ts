import { resolve } from 'node:path';
import { defaultArtifactsDir } from '../paths.js';
import { resolveTuning, type QueueTuning } from '../queue/tuning.js';
import { intOption, stringOption, type OptionSpec, type ParsedArgs } from './command.js';

/** Options shared by the queue commands (submit, worker, status, cancel, run). */
export const REDIS_OPTION: Record<string, OptionSpec> = {
  redis: {
    type: 'string',
    value: 'URL',
    description:
      'Redis to use: redis://[user:password@]host[:port][/db], rediss://... (TLS), unix:///path. Default: $REDIS_URL. A password in this flag shows in `ps` to every local user: leave it out of the URL and use --redis-password-file or $REDIS_PASSWORD.',
  },
  'redis-password-file': {
    type: 'string',
    value: 'FILE',
    description:
      "Read the Redis password from the first line of FILE (keep it 0600). Else $REDIS_PASSWORD, else the URL's own.",
  },
};

export const ARTIFACTS_OPTION: Record<string, OptionSpec> = {
  artifacts: {
    type: 'string',
    value: 'DIR',
    description:
      'Artifact root (audits/<id>/...); every host must see the same files. Default: $CANARY_AUDIT_HOME or ./artifacts.',
  },
};

export const SLOT_OPTIONS: Record<string, OptionSpec> = {
  gpus: {
    type: 'string',
    value: 'LIST',
    description: 'GPUs to use, one worker each, e.g. 0,1,2,3. Default: every GPU nvidia-smi lists, else CPU workers.',
  },
  cpu: {
    type: 'string',
    value: 'N',
    description:
      'Run N CPU workers (GPUs hidden), each with cores/N threads. Default when no GPU: one worker per core, 1 thread each.',
  },
  runner: {
    type: 'string',
    value: 'NAME',
    description: 'How to start the trainer: local (python on this host) or docker. Default: local.',
  },
  image: {
    type: 'string',
    value: 'IMAGE',
    description:
      'Trainer image for --runner docker. Default: $CANARY_AUDIT_TRAINER_IMAGE or canary-audit-trainer:latest.',
  },
};

export const TIMING_OPTIONS: Record<string, OptionSpec> = {
  'lock-ms': {
    type: 'string',
    value: 'MS',
    description:
      'Job lock time-to-live in ms; a dead worker loses its run after this. Default 30000 ($CANARY_AUDIT_LOCK_MS).',
  },
  'stalled-ms': {
    type: 'string',
    value: 'MS',
    description: 'Interval of the check for runs of dead workers, in ms. Default 30000 ($CANARY_AUDIT_STALLED_MS).',
  },
  'max-stalled': {
    type: 'string',
    value: 'N',
    description:
      'Times a run may be taken over from a dead worker before it fails. Default 3 ($CANARY_AUDIT_MAX_STALLED).',
  },
  'stop-grace-s': {
    type: 'string',
    value: 'S',
    description:
      'Seconds a trainer gets to checkpoint after SIGTERM before SIGKILL. Default 120 ($CANARY_AUDIT_STOP_GRACE_MS).',
  },
};

export const RETRY_OPTIONS: Record<string, OptionSpec> = {
  attempts: {
    type: 'string',
    value: 'N',
    description: 'Attempts per run for retryable failures (trainer exit 1). Default 3 ($CANARY_AUDIT_ATTEMPTS).',
  },
  'backoff-s': {
    type: 'string',
    value: 'S',
    description: 'First retry delay in seconds, doubled each retry. Default 60 ($CANARY_AUDIT_BACKOFF_MS).',
  },
};

export function artifactsFrom(args: ParsedArgs): string {
  return resolve(stringOption(args, 'artifacts') ?? defaultArtifactsDir());
}

function optionalInt(args: ParsedArgs, name: string, min: number, scale = 1): number | undefined {
  return stringOption(args, name) === undefined ? undefined : intOption(args, name, 0, min) * scale;
}

/** Defaults < environment < flags. */
export function tuningFrom(args: ParsedArgs): QueueTuning {
  const overrides: Partial<QueueTuning> = {};
  const set = <K extends keyof QueueTuning>(key: K, value: number | undefined) => {
    if (value !== undefined) overrides[key] = value;
  };
  set('lockMs', optionalInt(args, 'lock-ms', 100));
  set('stalledMs', optionalInt(args, 'stalled-ms', 100));
  set('maxStalled', optionalInt(args, 'max-stalled', 0));
  set('stopGraceMs', optionalInt(args, 'stop-grace-s', 0, 1000));
  set('attempts', optionalInt(args, 'attempts', 1));
  set('backoffMs', optionalInt(args, 'backoff-s', 0, 1000));
  return resolveTuning(overrides);
}

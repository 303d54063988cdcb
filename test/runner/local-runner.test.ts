import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { localRunner, trainerCacheDir } from '../../src/runner/local-runner.js';
import { RANKS_LAUNCHER, type TrainerJob } from '../../src/runner/index.js';

const ARTIFACTS = '/data/artifacts';
const job = (runDir = join(ARTIFACTS, 'audits', 'audit-0123456789ab', 'runs', 'run-0000000000000001')): TrainerJob => ({
  runId: 'run-0000000000000001',
  runDir,
  manifestPath: join(runDir, 'manifest.json'),
  outDir: join(runDir, 'output'),
  gpu: null,
  threads: 2,
});

const saved = { cache: process.env.CANARY_TRAINER_CACHE, home: process.env.CANARY_AUDIT_HOME };
const restore = (name: string, value: string | undefined): void => {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
};
beforeEach(() => {
  delete process.env.CANARY_TRAINER_CACHE;
});
afterEach(() => {
  restore('CANARY_TRAINER_CACHE', saved.cache);
  restore('CANARY_AUDIT_HOME', saved.home);
});

describe('local runner', () => {
  it("points the trainer's base cache at the artifact root's cache/ folder", () => {
    const cmd = localRunner({ python: '/usr/bin/python3', trainerPath: '/opt/trainer' }).command(job());
    expect(cmd.env.CANARY_TRAINER_CACHE).toBe(join(ARTIFACTS, 'cache'));
    expect(cmd.env).toMatchObject({
      PYTHONPATH: expect.stringMatching(/^\/opt\/trainer/),
      CUDA_VISIBLE_DEVICES: '',
      CANARY_TRAINER_THREADS: '2',
    });
    expect(cmd.args).toEqual([
      '-m',
      'canary_trainer',
      'run',
      '--manifest',
      job().manifestPath,
      '--out',
      job().outDir,
      '--resume',
    ]);
  });

  it('starts a run over several GPUs as one rank per GPU under torch.distributed.run, all its GPUs visible', () => {
    const cmd = localRunner({ python: '/usr/bin/python3', trainerPath: '/opt/trainer' }).command({
      ...job(),
      gpu: '2,3,4,5',
      threads: null,
      ranks: 4,
    });
    expect(cmd.env.CUDA_VISIBLE_DEVICES).toBe('2,3,4,5');
    // torch.distributed.run under a parent-death signal, told which parent to expect.
    expect(cmd.env.CANARY_TRAINER_PARENT_PID).toBe(String(process.pid));
    expect(cmd.args).toEqual([
      '-c',
      RANKS_LAUNCHER,
      '--standalone',
      '--nproc-per-node',
      '4',
      '-m',
      'canary_trainer',
      'run',
      '--manifest',
      job().manifestPath,
      '--out',
      job().outDir,
      '--resume',
    ]);
  });

  it('leaves a cache the worker environment already names to the trainer, and honours an explicit folder', () => {
    process.env.CANARY_TRAINER_CACHE = '/srv/bases';
    // Not in the added environment: the trainer inherits the worker's value.
    expect(localRunner().command(job()).env.CANARY_TRAINER_CACHE).toBeUndefined();
    expect(localRunner({ cacheDir: '/opt/cache' }).command(job()).env.CANARY_TRAINER_CACHE).toBe('/opt/cache');
    // An empty variable counts as unset.
    process.env.CANARY_TRAINER_CACHE = '';
    expect(localRunner().command(job()).env.CANARY_TRAINER_CACHE).toBe(join(ARTIFACTS, 'cache'));
  });

  it('falls back to the default artifact root for a run folder outside the audit layout', () => {
    process.env.CANARY_AUDIT_HOME = '/var/lib/canary';
    expect(trainerCacheDir('/tmp/somewhere/run-1')).toBe(join('/var/lib/canary', 'cache'));
    expect(trainerCacheDir(join(ARTIFACTS, 'audits', 'audit-x', 'runs', 'run-y'))).toBe(join(ARTIFACTS, 'cache'));
    expect(trainerCacheDir('relative/audits/a/runs/r')).toBe(resolve('relative', 'cache'));
  });
});

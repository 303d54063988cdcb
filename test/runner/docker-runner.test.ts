import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTAINER_RUN_DIR, dockerRunner, startTrainer, type TrainerJob } from '../../src/runner/index.js';
import { removeDir, tempDir, waitFor } from '../queue/helpers/fixtures.js';
import { defaultHfHome } from '../../src/runner/docker-runner.js';

/**
 * No Docker engine runs here: a stand-in `docker` on PATH records each argv (one JSON array per
 * line) and, for `run`, speaks the trainer protocol as the container would.
 */
const FAKE_DOCKER = `#!/usr/bin/env node
const fs = require('node:fs');
const args = process.argv.slice(2);
fs.appendFileSync(process.env.FAKE_DOCKER_LOG, JSON.stringify(args) + '\\n');
if (args[0] !== 'run') process.exit(0);
const emit = (o) => process.stdout.write(JSON.stringify({ v: 1, t: Date.now() / 1000, ...o }) + '\\n');
const mode = process.env.FAKE_DOCKER_MODE || 'ok';
// Handlers first: the test sends SIGTERM as soon as it reads "started".
if (mode === 'stubborn') process.on('SIGTERM', () => {});
else process.on('SIGTERM', () => { emit({ event: 'error', kind: 'interrupted', message: 'stopped', recoverable: true }); process.exit(75); });
emit({ event: 'started', run_id: 'run-0000000000000001', pid: process.pid, device: 'cuda:0', backend: 'hf', total_updates: 5, resumed_from: null });
if (mode === 'ok') {
  emit({ event: 'done', result: '${CONTAINER_RUN_DIR}/output/result.json', wall_s: 0.1 });
  process.exit(0);
}
setInterval(() => {}, 1000);
`;

const root = tempDir('docker');
const bin = join(root, 'bin');
const log = join(root, 'docker.log');
const savedPath = process.env.PATH;

const savedCache = process.env.CANARY_TRAINER_CACHE;

beforeAll(() => {
  // The default cache folder is derived from the run folder unless the environment names one.
  delete process.env.CANARY_TRAINER_CACHE;
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, 'docker'), FAKE_DOCKER);
  chmodSync(join(bin, 'docker'), 0o755);
  process.env.PATH = `${bin}${delimiter}${savedPath ?? ''}`;
  process.env.FAKE_DOCKER_LOG = log;
});
afterAll(() => {
  process.env.PATH = savedPath;
  if (savedCache !== undefined) process.env.CANARY_TRAINER_CACHE = savedCache;
  delete process.env.FAKE_DOCKER_LOG;
  delete process.env.FAKE_DOCKER_MODE;
  removeDir(root);
});

function job(gpu: string | null): TrainerJob {
  const runDir = join(root, 'audits', 'a', 'runs', 'run-0000000000000001');
  mkdirSync(join(runDir, 'output'), { recursive: true });
  return {
    runId: 'run-0000000000000001',
    runDir,
    manifestPath: join(runDir, 'manifest.json'),
    outDir: join(runDir, 'output'),
    gpu,
    threads: gpu === null ? 4 : null,
  };
}

const calls = (): string[][] =>
  existsSync(log)
    ? readFileSync(log, 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as string[])
    : [];

describe('docker runner', () => {
  it('builds the docker run argument array for a GPU run', () => {
    const j = job('3');
    const cmd = dockerRunner({ image: 'registry.example/trainer:1.2', user: '1000:1000', hfHome: '/data/hf' }).command(
      j,
    );
    expect(cmd.file).toBe('docker');
    expect(cmd.args).toEqual([
      'run',
      '--rm',
      '--init',
      '--name',
      'canary-audit-run-0000000000000001',
      '--user',
      '1000:1000',
      '--gpus',
      'device=3',
      '-e',
      'PYTHONUNBUFFERED=1',
      ...(process.env.HF_TOKEN !== undefined ? ['-e', 'HF_TOKEN'] : []),
      ...(process.env.HF_HUB_OFFLINE !== undefined ? ['-e', 'HF_HUB_OFFLINE'] : []),
      '-v',
      '/data/hf:/work/hf',
      '-e',
      'HF_HOME=/work/hf',
      '-v',
      `${join(root, 'cache')}:/work/cache`,
      '-e',
      'CANARY_TRAINER_CACHE=/work/cache',
      '-v',
      `${j.runDir}:/work/run`,
      '-w',
      '/work/run',
      'registry.example/trainer:1.2',
      'python',
      '-m',
      'canary_trainer',
      'run',
      '--manifest',
      '/work/run/manifest.json',
      '--out',
      '/work/run/output',
      '--resume',
    ]);
  });

  it('gives a run over several GPUs all of them (quoted for docker), the host IPC namespace and torch.distributed.run', () => {
    const args = dockerRunner({ image: 'img', user: null, hfHome: null }).command({ ...job('0,1'), ranks: 2 }).args;
    expect(args.join(' ')).toContain('--gpus "device=0,1" --ipc host');
    expect(args.slice(args.indexOf('img') + 1, args.indexOf('run', args.indexOf('img')))).toEqual([
      'python',
      '-m',
      'torch.distributed.run',
      '--standalone',
      '--nproc-per-node',
      '2',
      '-m',
      'canary_trainer',
    ]);
  });

  it('passes no GPU to a CPU run, limits its CPUs, and forwards secrets by name only', () => {
    const saved = process.env.HF_TOKEN;
    process.env.HF_TOKEN = 'hf_secret_value';
    try {
      const cmd = dockerRunner({ image: 'img', user: null, hfHome: null }).command(job(null));
      expect(cmd.args).not.toContain('--gpus');
      expect(cmd.args).not.toContain('--user');
      expect(cmd.args.join(' ')).toContain('-e CANARY_TRAINER_THREADS=4 --cpus 4');
      expect(cmd.args).toContain('HF_TOKEN');
      expect(cmd.args.join(' ')).not.toContain('hf_secret_value');
    } finally {
      if (saved === undefined) delete process.env.HF_TOKEN;
      else process.env.HF_TOKEN = saved;
    }
  });

  it("tells the container the audit's W&B project (it sees the run folder only) and forwards W&B's variables by name", () => {
    const j = job(null);
    const tracking = join(root, 'audits', 'a', 'tracking.json');
    writeFileSync(tracking, JSON.stringify({ wandb: { project: 'canaries', entity: 'lab' } }));
    const saved = { mode: process.env.WANDB_MODE, project: process.env.CANARY_TRAINER_WANDB_PROJECT };
    process.env.WANDB_MODE = 'offline';
    try {
      const args = dockerRunner({ image: 'img' }).command(j).args;
      expect(args.join(' ')).toContain(
        '-e WANDB_MODE -e CANARY_TRAINER_WANDB_PROJECT=canaries -e CANARY_TRAINER_WANDB_ENTITY=lab',
      );
      // A worker's --wandb wins: its variable is forwarded by name, the audit's file is not read.
      process.env.CANARY_TRAINER_WANDB_PROJECT = 'from-worker';
      const over = dockerRunner({ image: 'img' }).command(j).args;
      expect(over).toContain('CANARY_TRAINER_WANDB_PROJECT');
      expect(over.join(' ')).not.toContain('=canaries');
    } finally {
      rmSync(tracking);
      if (saved.mode === undefined) delete process.env.WANDB_MODE;
      else process.env.WANDB_MODE = saved.mode;
      if (saved.project === undefined) delete process.env.CANARY_TRAINER_WANDB_PROJECT;
      else process.env.CANARY_TRAINER_WANDB_PROJECT = saved.project;
    }
  });

  it("mounts the host's Hugging Face cache by default: $HF_HOME, else ~/.cache/huggingface", () => {
    expect(defaultHfHome({ HF_HOME: '/srv/hf' })).toBe('/srv/hf');
    expect(defaultHfHome({ HF_HOME: '', XDG_CACHE_HOME: '/srv/cache' })).toBe('/srv/cache/huggingface');
    expect(defaultHfHome({})).toBe(join(homedir(), '.cache', 'huggingface'));
    const args = dockerRunner({ image: 'img', user: null }).command(job(null)).args.join(' ');
    expect(args).toContain(`-v ${defaultHfHome()}:/work/hf -e HF_HOME=/work/hf`);
  });

  it('maps container paths the trainer reports back to the run folder', () => {
    const j = job('0');
    const runner = dockerRunner({ image: 'img' });
    expect(runner.toHostPath?.('/work/run/output/result.json', j)).toBe(join(j.runDir, 'output', 'result.json'));
    expect(runner.toHostPath?.('output/result.json', j)).toBe('output/result.json');
    expect(runner.toHostPath?.('/elsewhere/x', j)).toBe('/elsewhere/x');
  });

  it('removes a leftover container, then runs the image through the docker executable on PATH', async () => {
    writeFileSync(log, '');
    process.env.FAKE_DOCKER_MODE = 'ok';
    const j = job('1');
    const trainer = await startTrainer({
      runner: dockerRunner({ image: 'img', user: null, hfHome: null }),
      job: j,
      stderrLog: join(j.outDir, 'trainer.stderr.log'),
      stopGraceMs: 1000,
      onEvent: () => undefined,
    });
    const outcome = await trainer.finished;
    expect(outcome.outcome).toBe('ok');
    expect(outcome.done?.result).toBe('/work/run/output/result.json');
    const [first, second] = calls();
    expect(first).toEqual(['rm', '--force', 'canary-audit-run-0000000000000001']);
    expect(second?.slice(0, 5)).toEqual(['run', '--rm', '--init', '--name', 'canary-audit-run-0000000000000001']);
    expect(second).toContain('device=1');
    // prepare() made the cache folder, so docker does not create it as root.
    expect(existsSync(join(root, 'cache'))).toBe(true);
  });

  it("mounts the trainer's cache: the artifact root's cache/, or the host's $CANARY_TRAINER_CACHE", () => {
    const mount = (args: string[]): string[] => {
      const k = args.indexOf('CANARY_TRAINER_CACHE=/work/cache');
      return k < 0 ? [] : args.slice(k - 3, k + 1);
    };
    const j = job(null);
    expect(mount(dockerRunner({ image: 'img' }).command(j).args)).toEqual([
      '-v',
      `${join(root, 'cache')}:/work/cache`,
      '-e',
      'CANARY_TRAINER_CACHE=/work/cache',
    ]);
    process.env.CANARY_TRAINER_CACHE = '/srv/bases';
    try {
      expect(mount(dockerRunner({ image: 'img' }).command(j).args)).toEqual([
        '-v',
        '/srv/bases:/work/cache',
        '-e',
        'CANARY_TRAINER_CACHE=/work/cache',
      ]);
      expect(mount(dockerRunner({ image: 'img', cacheDir: '/opt/cache' }).command(j).args)[1]).toBe(
        '/opt/cache:/work/cache',
      );
    } finally {
      delete process.env.CANARY_TRAINER_CACHE;
    }
  });

  it('stops with SIGTERM, and kills the container after the grace period when that is not enough', async () => {
    writeFileSync(log, '');
    process.env.FAKE_DOCKER_MODE = 'stop';
    const j = job('0');
    const runner = dockerRunner({ image: 'img', user: null, hfHome: null });
    const polite = await startTrainer({
      runner,
      job: j,
      stderrLog: join(j.outDir, 'trainer.stderr.log'),
      stopGraceMs: 5_000,
      onEvent: (e) => e.event === 'started' && polite.stop(),
    });
    expect(await polite.finished).toMatchObject({ outcome: 'interrupted', exitCode: 75 });
    expect(calls().map((c) => c[0])).toEqual(['rm', 'run']);

    writeFileSync(log, '');
    process.env.FAKE_DOCKER_MODE = 'stubborn';
    const stubborn = await startTrainer({
      runner,
      job: j,
      stderrLog: join(j.outDir, 'trainer.stderr.log'),
      stopGraceMs: 300,
      onEvent: (e) => e.event === 'started' && stubborn.stop(),
    });
    expect(await stubborn.finished).toMatchObject({ outcome: 'interrupted', exitCode: null, signal: 'SIGKILL' });
    // forceStop runs beside execa's SIGKILL; wait for the fake to record it (slow on a loaded host).
    await waitFor('docker kill recorded', () => calls().some((c) => c[0] === 'kill'), 10_000, 50);
    expect(calls()).toContainEqual(['kill', 'canary-audit-run-0000000000000001']);
  });
});

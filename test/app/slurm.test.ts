import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  checkSlurmOptions,
  currentCli,
  DEFAULT_SLURM,
  sbatchAnswer,
  slurmScript,
  type SlurmScriptOptions,
} from '../../src/app/index.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

/** The sbatch script `canary-audit slurm` writes (the real-Slurm drill is test/slurm/slurm.test.ts). */
const root = tempDir('slurm-script');
afterAll(() => removeDir(root));

const options = (over: Partial<SlurmScriptOptions> = {}): SlurmScriptOptions => ({
  artifactsDir: '/shared/audits',
  workers: 8,
  maxRunning: 4,
  gpusPerWorker: 8,
  cpusPerWorker: 64,
  mem: '1000G',
  partition: 'gpu',
  account: 'lab',
  time: '1-00:00:00',
  signalS: 300,
  stopGraceS: 120,
  hfHome: DEFAULT_SLURM.hfHome,
  hfSeed: '/shared/hf',
  jobName: 'canary-audit-workers',
  logDir: '/shared/audits/slurm/logs',
  extra: ['--qos=high'],
  ...currentCli(),
  ...over,
});

describe('slurm script', () => {
  it('asks for an array, GPUs, a warning before the time limit and requeue; never holds the Redis URL', () => {
    const text = slurmScript(options());
    for (const line of [
      '--array=0-7%4',
      '--gres=gpu:8',
      '--cpus-per-task=64',
      '--mem=1000G',
      '--partition=gpu',
      '--account=lab',
      '--time=1-00:00:00',
      '--signal=B:USR1@300',
      '--requeue',
      '--open-mode=append',
      '--qos=high',
    ]) {
      expect(text).toContain(`#SBATCH ${line}\n`);
    }
    expect(text).toContain('--output=/shared/audits/slurm/logs/%x-%A_%a.out');
    expect(text).toContain('worker --gpus "${CUDA_VISIBLE_DEVICES:?');
    expect(text).toContain('cp -a -n \'/shared/hf\'/. "$HF_HOME"/');
    expect(text).toContain('scontrol requeue "$self"');
    expect(text).not.toMatch(/redis:\/\/[^:]*:[^P]/);
    const file = join(root, 'w.sbatch');
    writeFileSync(file, text);
    execFileSync('bash', ['-n', file]);
    // CPU workers: no GPUs asked, one trainer per CPU of the task.
    const cpu = slurmScript(
      options({
        gpusPerWorker: 0,
        cpusPerWorker: 4,
        maxRunning: null,
        partition: null,
        account: null,
        mem: null,
        hfSeed: null,
        extra: [],
      }),
    );
    expect(cpu).not.toContain('--gres');
    expect(cpu).toContain('#SBATCH --array=0-7\n');
    expect(cpu).toContain('worker --cpu "${SLURM_CPUS_PER_TASK:-1}"');
    expect(cpu).not.toContain('cp -a -n');
  });

  it('refuses a warning too short to checkpoint, a cap above the array, a time Slurm cannot read', () => {
    expect(() => checkSlurmOptions(options({ signalS: 60 }))).toThrow(
      /--signal-s 60 leaves no time to checkpoint: .* use --signal-s 180 or more/,
    );
    expect(() => checkSlurmOptions(options({ maxRunning: 9 }))).toThrow(/--max-running 9 is more than --workers 8/);
    expect(() => checkSlurmOptions(options({ time: 'a day' }))).toThrow(/--time "a day" is not a Slurm time/);
    expect(() => checkSlurmOptions(options())).not.toThrow();
  });

  it("turns sbatch's answer into one line", () => {
    expect(
      sbatchAnswer(
        'sbatch: error: invalid partition specified: nope\nsbatch: error: Batch job submission failed: Invalid partition name specified\n',
      ),
    ).toBe('invalid partition specified: nope (Batch job submission failed: Invalid partition name specified)');
    expect(sbatchAnswer('')).toBe('');
  });
});

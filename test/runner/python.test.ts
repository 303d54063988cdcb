import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TRAINER_DIR } from '../../src/paths.js';
import { localRunner } from '../../src/runner/local-runner.js';
import { TRAINER_VENV, trainerPython, trainerPythonHint } from '../../src/runner/python.js';

const VENV_PYTHON = join(TRAINER_DIR, '.venv', 'bin', 'python');

describe("the trainer's Python", () => {
  it('is the trainer venv by default, CANARY_AUDIT_PYTHON when set (empty counts as unset)', () => {
    expect(TRAINER_VENV).toBe(join(TRAINER_DIR, '.venv'));
    expect(trainerPython({})).toBe(VENV_PYTHON);
    expect(trainerPython({ CANARY_AUDIT_PYTHON: '' })).toBe(VENV_PYTHON);
    expect(trainerPython({ CANARY_AUDIT_PYTHON: '/opt/py/bin/python' })).toBe('/opt/py/bin/python');
  });

  it('is what the local runner starts', () => {
    const job = {
      runId: 'r',
      runDir: '/tmp/r',
      manifestPath: '/tmp/r/manifest.json',
      outDir: '/tmp/r/output',
      gpu: null,
      threads: 1,
    };
    expect(localRunner().command(job).file).toBe(trainerPython());
  });

  it('names the fix when it is missing', () => {
    expect(trainerPythonHint(VENV_PYTHON.replace('.venv', '.venv-missing'))).toMatch(
      /CANARY_AUDIT_PYTHON=.*does not exist/,
    );
    expect(trainerPythonHint('/no/such/python')).toBe('CANARY_AUDIT_PYTHON=/no/such/python does not exist');
    expect(trainerPythonHint('python3')).toBeNull(); // looked up on PATH by the spawn
    expect(trainerPythonHint(process.execPath)).toBeNull();
  });
});

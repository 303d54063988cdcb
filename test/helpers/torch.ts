import { execFileSync } from 'node:child_process';
import { trainerPython } from '../../src/runner/python.js';

/** Whether the trainer's Python sees torch: tests that train a real model skip cleanly without it. */
export const hasTorch: boolean = (() => {
  try {
    execFileSync(trainerPython(), ['-c', 'import torch'], { stdio: 'ignore', timeout: 60_000 });
    return true;
  } catch {
    return false;
  }
})();

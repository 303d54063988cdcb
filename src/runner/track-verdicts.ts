import { delimiter } from 'node:path';
import { execa } from 'execa';
import { TRAINER_DIR } from '../paths.js';
import { trainerPython, trainerPythonHint } from './python.js';

/** What `python -m canary_trainer.track_verdicts` did with the report's verdicts. */
export interface TrackedVerdicts {
  /** The TensorBoard folder written (<audit>/tensorboard/verdicts), or null. */
  tensorboard: string | null;
  /** Sent to the audit's W&B project. */
  wandb: boolean;
  /** Each a line that says what was not done and the fix (a missing tensorboardX or wandb, a failed start). */
  warnings: string[];
}

/**
 * The report's verdicts to TensorBoard, and to W&B when the audit's tracking.json asks
 * (trainer-py/canary_trainer/track_verdicts.py). Best effort: the report is the record, so a
 * failure is a warning, never a failed report.
 */
export async function trackVerdicts(summaryPath: string, auditDir: string): Promise<TrackedVerdicts> {
  const inherited = process.env.PYTHONPATH;
  const python = trainerPython();
  const result = await execa(
    python,
    ['-m', 'canary_trainer.track_verdicts', '--summary', summaryPath, '--audit', auditDir],
    {
      env: { PYTHONPATH: inherited ? `${TRAINER_DIR}${delimiter}${inherited}` : TRAINER_DIR },
      reject: false,
      timeout: 120_000,
    },
  );
  const line = String(result.stdout ?? '')
    .trim()
    .split('\n')
    .findLast((l) => l.startsWith('{'));
  if (result.exitCode === 0 && line) return JSON.parse(line) as TrackedVerdicts;
  const why =
    result.exitCode === undefined
      ? `cannot start the trainer's Python: ${trainerPythonHint(python) ?? String(result.shortMessage ?? '').split('\n')[0]}`
      : (String(result.stderr ?? '')
          .split('\n')
          .filter(Boolean)
          .at(-1) ?? `exit ${String(result.exitCode)}`);
  return {
    tensorboard: null,
    wandb: false,
    warnings: [
      `the verdicts were not tracked: ${why}${/fix:|\.ci\/setup/.test(why) ? '' : "; fix: bash .ci/setup builds trainer-py/.venv, or point CANARY_AUDIT_PYTHON at a Python with the trainer's packages"}`,
    ],
  };
}

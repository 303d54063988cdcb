import { UserInputError, quoteValue } from '../errors.js';
import { stringOption, type OptionSpec, type ParsedArgs } from './command.js';

/** The trainer's variable for the W&B project (trainer-py/canary_trainer/tracking.py); empty turns W&B off. */
export const WANDB_PROJECT_ENV = 'CANARY_TRAINER_WANDB_PROJECT';

/** `--wandb PROJECT` of run and submit: every run of the audit also reports to W&B. */
export const WANDB_OPTION: Record<string, OptionSpec> = {
  wandb: {
    type: 'string',
    value: 'PROJECT',
    description:
      "Also send each run's training curves and evaluation phases to this Weights & Biases project (one W&B run per training run, grouped by audit; overrides the grid's tracking.wandb.project; stored in <audit>/tracking.json). Needs wandb in the trainer's Python; WANDB_MODE=offline writes <run>/output/wandb/ with no network. Default: the grid's tracking block, else TensorBoard files only.",
  },
};

/** `--wandb PROJECT` of worker: every run this worker trains reports to W&B, whatever its audit says. */
export const WORKER_WANDB_OPTION: Record<string, OptionSpec> = {
  wandb: {
    type: 'string',
    value: 'PROJECT',
    description: `Send every run this worker trains to this Weights & Biases project, over the audit's own tracking (sets ${WANDB_PROJECT_ENV} for its trainers; --wandb '' turns W&B off). Default: each audit's tracking.json.`,
  },
};

/** The --wandb value: undefined when not given; a worker may pass '' (off), run and submit may not. */
export function wandbFrom(args: ParsedArgs, allowEmpty = false): string | undefined {
  const raw = stringOption(args, 'wandb');
  if (raw === undefined) return undefined;
  const project = raw.trim();
  if (project === '' && !allowEmpty)
    throw new UserInputError(
      `--wandb ${quoteValue(raw)} is empty; give a W&B project name, e.g. --wandb canary-audits`,
      {
        field: '--wandb',
        code: 'E_BAD_FLAG',
      },
    );
  if (/[/\\#?%]/.test(project))
    throw new UserInputError(
      `--wandb ${quoteValue(raw)}: a W&B project name cannot hold / \\ # ? %; give the bare project (the entity goes in the grid's tracking.wandb.entity)`,
      { field: '--wandb', code: 'E_BAD_FLAG' },
    );
  return project;
}

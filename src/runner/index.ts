import { UserInputError, quoteValue } from '../errors.js';
import { dockerRunner, type DockerRunnerOptions } from './docker-runner.js';
import { localRunner, type LocalRunnerOptions } from './local-runner.js';
import type { TrainerRunner } from './trainer-runner.js';

export {
  RANKS_LAUNCHER,
  trainerModuleArgs,
  type TrainerCommand,
  type TrainerJob,
  type TrainerRunner,
} from './trainer-runner.js';
export { startTrainer, type RunningTrainer, type TrainerOutcome, type TrainerRunOptions } from './run-trainer.js';
export { classifyExit, type ExitFacts, type ExitOutcome, type ExitStatus } from './exit-status.js';
export { LineSplitter, MAX_LINE, parseProgressLine, type ParsedLine } from './progress-protocol.js';
export { localRunner, type LocalRunnerOptions } from './local-runner.js';
export { trackVerdicts, type TrackedVerdicts } from './track-verdicts.js';
export {
  dockerRunner,
  containerName,
  CONTAINER_RUN_DIR,
  DEFAULT_TRAINER_IMAGE,
  type DockerRunnerOptions,
} from './docker-runner.js';

/** Runners by name, for `worker --runner NAME`. */
export const RUNNERS = {
  local: (options: LocalRunnerOptions & DockerRunnerOptions) => localRunner(options),
  docker: (options: LocalRunnerOptions & DockerRunnerOptions) => dockerRunner(options),
} as const;

export type RunnerName = keyof typeof RUNNERS;

export function createRunner(name: string, options: LocalRunnerOptions & DockerRunnerOptions = {}): TrainerRunner {
  const make = (RUNNERS as Record<string, (o: LocalRunnerOptions & DockerRunnerOptions) => TrainerRunner>)[name];
  if (!make) {
    throw new UserInputError(
      `--runner ${quoteValue(name)} is not a runner; use one of: ${Object.keys(RUNNERS).join(', ')}`,
      {
        field: '--runner',
        code: 'E_BAD_FLAG',
      },
    );
  }
  return make(options);
}
export { trainerPython, trainerPythonHint, TRAINER_VENV } from './python.js';
export { countRowTokens } from './check-rows.js';

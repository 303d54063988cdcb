import { existsSync, statSync } from 'node:fs';
import { UserInputError, quoteValue } from '../errors.js';
import { BUILTIN_MODELS, loadGrid } from '../grid/index.js';
import { fetchSnapshot, isHubId, type FetchOptions, type FetchedSnapshot } from '../hub/index.js';

/**
 * `models fetch`: put Hub models into the local Hugging Face cache, where workers and trainers
 * (offline) load them. The argument is a grid file (every Hub model of its model axis), a model
 * preset name (qwen3-0.6b) or a Hub id (org/name).
 */
export interface ModelRef {
  name: string;
  revision: string | null;
}

export async function modelsToFetch(arg: string, revision: string | null): Promise<ModelRef[]> {
  if (existsSync(arg) && statSync(arg).isFile()) {
    if (revision !== null) {
      throw new UserInputError(
        `applies to a single MODEL; ${arg} is a grid, whose model entries name their own \`revision\``,
        { field: '--revision', code: 'E_BAD_FLAG' },
      );
    }
    return gridModels(arg);
  }
  const preset = BUILTIN_MODELS[arg];
  if (preset) {
    if (preset.backend !== 'hf')
      throw new UserInputError(`${arg} is the built-in tiny model; it is not downloaded`, { code: 'E_BAD_ARGS' });
    return [{ name: preset.name, revision: revision ?? preset.revision }];
  }
  if (isHubId(arg)) return [{ name: arg, revision }];
  throw new UserInputError(
    `${quoteValue(arg)} is neither a grid file, a model preset (${hfPresets().join(', ')}) nor a Hub id (org/name)`,
    { code: 'E_BAD_ARGS' },
  );
}

async function gridModels(file: string): Promise<ModelRef[]> {
  const grid = await loadGrid(file);
  const seen = new Map<string, ModelRef>();
  for (const { value } of grid.expansion.axes.model) {
    if (value.backend === 'hf' && isHubId(value.name))
      seen.set(`${value.name}@${value.revision ?? ''}`, { name: value.name, revision: value.revision });
  }
  return [...seen.values()];
}

function hfPresets(): string[] {
  return Object.entries(BUILTIN_MODELS)
    .filter(([, m]) => m.backend === 'hf')
    .map(([name]) => name);
}

/** Fetch each model in turn; `onModel` is told before each starts. */
export async function fetchModels(
  models: ModelRef[],
  options: FetchOptions & { onModel?: (model: ModelRef) => void } = {},
): Promise<FetchedSnapshot[]> {
  const fetched: FetchedSnapshot[] = [];
  for (const model of models) {
    options.onModel?.(model);
    fetched.push(await fetchSnapshot(model.name, model.revision, options));
  }
  return fetched;
}

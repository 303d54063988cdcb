import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UserInputErrors } from '../errors.js';
import { fetchCommand, HubCache, hubCacheDir, isHubId } from '../hub/index.js';
import {
  bpeTokenizer,
  checkHfLengths,
  planAudit,
  writeAudit,
  type AuditPlan,
  type TokenCount,
  type TokenCounter,
  type TokenizerLoader,
  type WrittenAudit,
} from '../manifest/index.js';
import { countRowTokens, trainerPythonHint } from '../runner/index.js';
import { taskDataLoader } from './task-data.js';
import { pinIfAsked, type ModelRevisions, type PinChoice } from './pinning.js';

export interface PlanGridOptions extends PinChoice {
  /** Write the audit under DIR/audits/<audit_id>/ (default: plan only). */
  out?: string;
}

export interface PlannedGrid {
  plan: AuditPlan;
  models: ModelRevisions;
  written?: WrittenAudit;
}

/**
 * Expand a grid, pin its model revisions (unless turned off), refuse rows too long for a model,
 * and with `out` write the audit: what `plan` does, and what `submit` and `run` do with a grid.
 */
export async function planGrid(
  gridPath: string,
  options: PlanGridOptions & { out: string },
): Promise<Required<PlannedGrid>>;
export async function planGrid(gridPath: string, options?: PlanGridOptions): Promise<PlannedGrid>;
export async function planGrid(gridPath: string, options: PlanGridOptions = {}): Promise<PlannedGrid> {
  const artifactsDir = options.out ? resolve(options.out) : undefined;
  const { plan, models } = await pinIfAsked(
    await planAudit(gridPath, {
      ...(artifactsDir ? { artifactsDir } : {}),
      loadTaskData: taskDataLoader(gridPath, options.hub),
      loadTokenizer: readTokenizer,
    }),
    options,
  );
  await refuseLongRows(plan);
  if (!artifactsDir) return { plan, models };
  return { plan, models, written: await writeAudit(plan, artifactsDir) };
}

/** Throws the plan's Hugging Face row-length errors (one per model and task), if any. */
async function refuseLongRows(plan: AuditPlan): Promise<void> {
  const errors = await checkHfLengths(plan, tokenizerCount);
  if (errors.length > 0) throw new UserInputErrors(errors);
}

/** The trainer's token count, for the models whose tokenizer is on this machine (the others skipped). */
const tokenizerCount: TokenCounter = async (jobs) => {
  const why = jobs.map((job) => tokenizerUnavailable(job.model.name, job.model.revision));
  const counted = await countRowTokens(
    jobs.filter((_, k) => why[k] === null),
    hubCacheDir(),
  );
  return jobs.map((_, k) => (why[k] ? { skipped: why[k] } : (counted.shift() as TokenCount)));
};

/** Why the model's tokenizer cannot be read here, or null. */
function tokenizerUnavailable(name: string, revision: string | null): string | null {
  const hint = trainerPythonHint();
  if (hint) return hint;
  let folder: string;
  if (isHubId(name)) {
    const cache = new HubCache(hubCacheDir());
    const sha = cache.cachedSha(name, revision ?? 'main');
    if (sha === null) return `not in the local cache ${cache.dir}`;
    folder = cache.snapshotDir(name, sha);
  } else folder = name;
  return ['tokenizer.json', 'tokenizer_config.json'].some((f) => existsSync(join(folder, f)))
    ? null
    : `no tokenizer in ${folder}`;
}

/**
 * An hf model's tokenizer (design rare-tokens) from its folder or the local Hub cache, offline:
 * tokenizer.json and tokenizer_config.json of the snapshot the revision names.
 */
export const readTokenizer: TokenizerLoader = async ({ name, revision }) => {
  let folder: string;
  if (isHubId(name)) {
    const cache = new HubCache(hubCacheDir());
    const sha = cache.cachedSha(name, revision ?? 'main');
    if (sha === null)
      throw new RangeError(
        `${name}@${revision ?? 'main'} is not in the local cache ${cache.dir}; fetch it where the Hub is reachable: ${fetchCommand(name, revision)}`,
      );
    folder = cache.snapshotDir(name, sha);
  } else folder = name;
  const file = join(folder, 'tokenizer.json');
  if (!existsSync(file)) throw new RangeError(`no tokenizer.json in ${folder}`);
  const config = join(folder, 'tokenizer_config.json');
  const read = (path: string): unknown => {
    try {
      return JSON.parse(readFileSync(path, 'utf8'));
    } catch (error) {
      throw new RangeError(`${path} is not readable JSON (${(error as Error).message}); fetch the model again`);
    }
  };
  return bpeTokenizer(read(file), existsSync(config) ? read(config) : {}, file);
};

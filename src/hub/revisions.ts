import { modelInfo } from '@huggingface/hub';
import { CanaryAuditError, UserInputError } from '../errors.js';
import { formatPath } from '../grid/index.js';
import type { AuditPlan } from '../manifest/index.js';

/**
 * Pin Hugging Face model revisions to commit shas at plan time, so a manifest names the exact
 * weights it trains rather than a branch that may move. Uses the Hub API through
 * @huggingface/hub (`$HF_ENDPOINT` selects a mirror; `$HF_TOKEN` is sent for gated models).
 */
export interface HubOptions {
  /** Hub base URL; default $HF_ENDPOINT, else https://huggingface.co. */
  hubUrl?: string;
  accessToken?: string;
  fetch?: typeof fetch;
}

const COMMIT_SHA = /^[0-9a-f]{40}$/;

/** A Hub id (org/name or name), not a local folder. */
export function isHubId(name: string): boolean {
  return !name.startsWith('/') && !name.startsWith('.') && !name.startsWith('~') && /^[A-Za-z0-9][\w.-]*(\/[\w.-]+)?$/.test(name);
}

export class HubNotFound extends Error {
  override name = 'HubNotFound';
}

/** The commit sha that `revision` (default main) of model `name` points to now. */
export async function resolveRevision(name: string, revision: string | null, options: HubOptions = {}): Promise<string> {
  if (revision !== null && COMMIT_SHA.test(revision)) return revision;
  const hubUrl = options.hubUrl ?? process.env.HF_ENDPOINT ?? undefined;
  const token = options.accessToken ?? process.env.HF_TOKEN;
  let info: { sha?: string };
  try {
    info = await modelInfo({
      name,
      revision: revision ?? 'main',
      additionalFields: ['sha'],
      ...(hubUrl ? { hubUrl: hubUrl.replace(/\/+$/, '') } : {}),
      ...(token?.startsWith('hf_') ? { accessToken: token } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  } catch (error) {
    const status = (error as { statusCode?: number }).statusCode;
    if (status === 404 || status === 401) throw new HubNotFound(`model ${JSON.stringify(name)} at revision ${JSON.stringify(revision ?? 'main')} is not on ${hubUrl ?? 'the Hub'} (HTTP ${status})`);
    throw new CanaryAuditError('E_HUB', `cannot reach ${hubUrl ?? 'the Hugging Face Hub'} to pin ${name}: ${(error as Error).message}`, { cause: error });
  }
  if (typeof info.sha !== 'string' || !COMMIT_SHA.test(info.sha)) {
    throw new CanaryAuditError('E_HUB', `the Hub returned no commit sha for ${name}@${revision ?? 'main'}`);
  }
  return info.sha;
}

/**
 * Every hf model of the plan, with its revision replaced by a commit sha (one Hub call per
 * distinct name and revision). Local paths and revisions that already are shas are left as they are.
 */
export async function pinPlanRevisions(plan: AuditPlan, options: HubOptions = {}): Promise<AuditPlan> {
  const pinned = new Map<string, Promise<string>>();
  const runs = [];
  for (const run of plan.runs) {
    const model = run.cell.values.model;
    const m = model.value;
    if (m.backend !== 'hf' || !isHubId(m.name)) {
      runs.push(run);
      continue;
    }
    const key = `${m.name}@${m.revision ?? ''}`;
    if (!pinned.has(key)) pinned.set(key, resolveRevision(m.name, m.revision, options));
    let sha: string;
    try {
      sha = await (pinned.get(key) as Promise<string>);
    } catch (error) {
      if (!(error instanceof HubNotFound)) throw error;
      throw new UserInputError(`${error.message}; check the model name and revision`, {
        location: plan.grid.source.locate(model.path),
        field: formatPath(model.path),
        code: 'E_HUB_MODEL',
      });
    }
    const values = { ...run.cell.values, model: { ...model, value: { ...m, revision: sha } } };
    runs.push({ ...run, cell: { ...run.cell, values } });
  }
  return { ...plan, runs };
}

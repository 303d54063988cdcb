import { datasetInfo, modelInfo } from '@huggingface/hub';
import { CanaryAuditError } from '../errors.js';
import { COMMIT_SHA, type RepoType } from './cache.js';
import { hubEndpoint, hubToken } from './env.js';

/**
 * How this process talks to the Hub. The token is added to requests here, by a fetch wrapper, and
 * only for the Hub's own origin (never to the CDN a download is redirected to); @huggingface/hub
 * never sees it, so no error or log line of the library can carry it.
 */
export interface HubOptions {
  /** Hub base URL; default $HF_ENDPOINT, else https://huggingface.co. */
  hubUrl?: string;
  /** Access token; default from the environment or the CLI's token file (see env.ts); null: none. */
  accessToken?: string | null;
  fetch?: typeof fetch;
}

/** Resolved options: what the library calls take. */
export interface HubClient {
  hubUrl: string;
  fetch: typeof fetch;
  /** Whether a token is sent (never the token). */
  authenticated: boolean;
}

export function hubClient(options: HubOptions = {}): HubClient {
  const hubUrl = (options.hubUrl ?? hubEndpoint()).replace(/\/+$/, '');
  const token = options.accessToken === undefined ? (hubToken()?.value ?? null) : options.accessToken;
  const base = options.fetch ?? fetch;
  const origin = new URL(hubUrl).origin;
  const wrapped: typeof fetch = (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!token || new URL(url).origin !== origin) return base(input, init);
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return base(input, { ...init, headers });
  };
  return { hubUrl, fetch: wrapped, authenticated: Boolean(token) };
}

/** What went wrong talking to the Hub, in the terms a user acts on. */
export type HubFailure = 'not-found' | 'unauthorized' | 'unreachable';

export class HubError extends CanaryAuditError {
  readonly failure: HubFailure;
  readonly status: number | undefined;
  readonly repoType: RepoType;

  constructor(
    failure: HubFailure,
    message: string,
    status: number | undefined,
    cause: unknown,
    repoType: RepoType = 'model',
  ) {
    const code =
      failure === 'unreachable' ? 'E_HUB_UNREACHABLE' : repoType === 'dataset' ? 'E_HUB_DATASET' : 'E_HUB_MODEL';
    super(code, message, { cause, exitCode: failure === 'unreachable' ? 1 : 2 });
    this.name = 'HubError';
    this.failure = failure;
    this.status = status;
    this.repoType = repoType;
  }
}

/**
 * Classify a failed Hub call. 404 (and 401 without a token: the Hub answers 401 for repositories
 * it will not show) means the name or revision is wrong or gated; 5xx and network errors mean the
 * Hub cannot be reached now.
 */
export function hubError(error: unknown, what: string, client: HubClient, repoType: RepoType = 'model'): HubError {
  if (error instanceof HubError) return error;
  const status = (error as { statusCode?: number }).statusCode;
  const where = client.hubUrl;
  if (status === 404)
    return new HubError(
      'not-found',
      `${what} is not on ${where} (HTTP 404); check the name and revision`,
      status,
      error,
      repoType,
    );
  if (status === 401 || status === 403) {
    const hint = client.authenticated
      ? `the token sent has no access: accept the ${repoType}'s terms on its Hub page or use a token with read access`
      : 'it may be gated or private: set HF_TOKEN (or run `hf auth login`) with a token that has access';
    return new HubError(
      'unauthorized',
      `${what} is not available from ${where} (HTTP ${status}); ${hint}`,
      status,
      error,
      repoType,
    );
  }
  const reason = status === undefined ? causeText(error) : `HTTP ${status}`;
  return new HubError('unreachable', `cannot reach ${where} for ${what}: ${reason}`, status, error, repoType);
}

function causeText(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message;
}

/** The commit sha that `revision` of repository `name` (a model unless told) points to on the Hub now. */
export async function remoteCommit(
  name: string,
  revision: string,
  client: HubClient,
  repoType: RepoType = 'model',
): Promise<string> {
  let info: { sha?: string };
  try {
    const params = { name, revision, additionalFields: ['sha' as const], hubUrl: client.hubUrl, fetch: client.fetch };
    info = repoType === 'dataset' ? await datasetInfo(params) : await modelInfo(params);
  } catch (error) {
    throw hubError(
      error,
      `${repoType} ${JSON.stringify(name)} at revision ${JSON.stringify(revision)}`,
      client,
      repoType,
    );
  }
  if (typeof info.sha !== 'string' || !COMMIT_SHA.test(info.sha)) {
    throw new CanaryAuditError('E_HUB', `${client.hubUrl} returned no commit sha for ${name}@${revision}`);
  }
  return info.sha;
}

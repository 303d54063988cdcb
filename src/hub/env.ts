import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * Where the Hugging Face tools keep things, read from the same variables as `huggingface_hub`
 * (Python), so a snapshot fetched here is found by transformers on a worker with
 * HF_HUB_OFFLINE=1, and a token saved by `hf auth login` is used here.
 */
type Env = Record<string, string | undefined>;

/** $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface. */
export function hfHome(env: Env = process.env): string {
  if (env.HF_HOME) return env.HF_HOME;
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'huggingface');
}

/** The model cache: $HF_HUB_CACHE (or the older $HUGGINGFACE_HUB_CACHE), else <HF_HOME>/hub. */
export function hubCacheDir(env: Env = process.env): string {
  return env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE || join(hfHome(env), 'hub');
}

/** The Hub's base URL: $HF_ENDPOINT, else https://huggingface.co (no trailing slash). */
export function hubEndpoint(env: Env = process.env): string {
  return (env.HF_ENDPOINT || 'https://huggingface.co').replace(/\/+$/, '');
}

/** True when HF_HUB_OFFLINE asks every tool not to call the Hub. */
export function hubOffline(env: Env = process.env): boolean {
  return ['1', 'on', 'yes', 'true'].includes((env.HF_HUB_OFFLINE ?? '').toLowerCase());
}

/** Where a token was found; the token itself is never printed or logged. */
export interface HubToken {
  value: string;
  source: 'HF_TOKEN' | 'HUGGING_FACE_HUB_TOKEN' | 'token file';
}

/**
 * The access token: $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN, else the file the Hugging Face CLI
 * writes ($HF_TOKEN_PATH, default <HF_HOME>/token). Null when there is none.
 */
export function hubToken(env: Env = process.env): HubToken | null {
  const fromEnv = (name: 'HF_TOKEN' | 'HUGGING_FACE_HUB_TOKEN'): HubToken | null => {
    const value = env[name]?.trim();
    return value ? { value, source: name } : null;
  };
  return (
    fromEnv('HF_TOKEN') ??
    fromEnv('HUGGING_FACE_HUB_TOKEN') ??
    tokenFile(env.HF_TOKEN_PATH || join(hfHome(env), 'token'))
  );
}

function tokenFile(path: string): HubToken | null {
  try {
    const value = readFileSync(path, 'utf8').trim();
    return value ? { value, source: 'token file' } : null;
  } catch {
    return null;
  }
}

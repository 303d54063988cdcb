import { randomBytes } from 'node:crypto';
import { FakeHub, type FakeRepo } from './fake-hub.js';

/**
 * The fake Hub the hub tests share: a small model repo (config, tokenizer, safetensors bytes in
 * LFS, one file in a subfolder) with two commits (main and tag v1), a gated copy, and a token.
 */
export const TOKEN = 'hf_fakeSecretToken0123456789abcdefXYZ';
export const SHA_MAIN = '1'.repeat(8) + 'a'.repeat(32);
export const SHA_V1 = '2'.repeat(8) + 'b'.repeat(32);
export const SHA_GATED = '3'.repeat(8) + 'c'.repeat(32);

const config = Buffer.from(JSON.stringify({ model_type: 'qwen3', hidden_size: 8, num_hidden_layers: 1 }));
const weights = randomBytes(300_000);

function files(extra: string): FakeRepo['commits'][string] {
  return {
    'config.json': { content: config },
    'tokenizer.json': { content: Buffer.from(`{"version": "1.0", "note": "${extra}"}`) },
    'model.safetensors': { content: weights, lfs: true },
    'extra/generation_config.json': { content: Buffer.from('{"do_sample": false}') },
  };
}

export function fakeRepos(): Record<string, FakeRepo> {
  return {
    'org/tiny-model': {
      branches: { main: SHA_MAIN, v1: SHA_V1 },
      commits: { [SHA_MAIN]: files('main'), [SHA_V1]: files('v1') },
    },
    'org/gated-model': { branches: { main: SHA_GATED }, commits: { [SHA_GATED]: files('gated') }, gated: true },
  };
}

export async function startFakeHub(): Promise<FakeHub> {
  return new FakeHub(fakeRepos(), TOKEN).start();
}

/** Set environment variables for one test; returns the function that restores them. */
export function withEnv(vars: Record<string, string | undefined>): () => void {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const apply = (values: Record<string, string | undefined>): void => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  apply(vars);
  return () => apply(saved);
}

/** Hub variables cleared, so a developer's own token or cache never leaks into a test. */
export const CLEAN_HUB_ENV = {
  HF_TOKEN: undefined,
  HUGGING_FACE_HUB_TOKEN: undefined,
  HF_TOKEN_PATH: undefined,
  HF_HUB_OFFLINE: undefined,
  HUGGINGFACE_HUB_CACHE: undefined,
};

/** A URL nothing listens on: a port bound, then released. */
export async function deadHubUrl(): Promise<string> {
  const { createServer } = await import('node:net');
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

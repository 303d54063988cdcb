import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hubCacheDir, hubEndpoint, hubOffline, hubToken } from '../../src/hub/index.js';

const root = mkdtempSync(join(tmpdir(), 'canary-hub-env-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('Hugging Face settings, read as huggingface_hub reads them', () => {
  it('finds the cache: HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME or ~/.cache', () => {
    expect(hubCacheDir({ HF_HUB_CACHE: '/c', HF_HOME: '/h' })).toBe('/c');
    expect(hubCacheDir({ HUGGINGFACE_HUB_CACHE: '/old' })).toBe('/old');
    expect(hubCacheDir({ HF_HOME: '/h' })).toBe('/h/hub');
    expect(hubCacheDir({ XDG_CACHE_HOME: '/x' })).toBe('/x/huggingface/hub');
    expect(hubCacheDir({})).toBe(join(homedir(), '.cache', 'huggingface', 'hub'));
  });

  it('takes the token from HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then the CLI token file', () => {
    const home = join(root, 'home');
    const file = join(root, 'token');
    writeFileSync(file, 'hf_fromFile\n');
    expect(hubToken({ HF_TOKEN: 'hf_a', HUGGING_FACE_HUB_TOKEN: 'hf_b', HF_TOKEN_PATH: file })).toEqual({
      value: 'hf_a',
      source: 'HF_TOKEN',
    });
    expect(hubToken({ HUGGING_FACE_HUB_TOKEN: 'hf_b', HF_TOKEN_PATH: file })).toEqual({
      value: 'hf_b',
      source: 'HUGGING_FACE_HUB_TOKEN',
    });
    expect(hubToken({ HF_TOKEN: '', HF_TOKEN_PATH: file })).toEqual({ value: 'hf_fromFile', source: 'token file' });
    expect(hubToken({ HF_HOME: root })).toEqual({ value: 'hf_fromFile', source: 'token file' });
    expect(hubToken({ HF_HOME: home })).toBeNull();
  });

  it('reads the endpoint and the offline switch', () => {
    expect(hubEndpoint({})).toBe('https://huggingface.co');
    expect(hubEndpoint({ HF_ENDPOINT: 'https://mirror.example/' })).toBe('https://mirror.example');
    expect([
      hubOffline({ HF_HUB_OFFLINE: '1' }),
      hubOffline({ HF_HUB_OFFLINE: 'true' }),
      hubOffline({ HF_HUB_OFFLINE: '0' }),
      hubOffline({}),
    ]).toEqual([true, true, false, false]);
  });
});

// tier: slow (Python)
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchSnapshot } from '../../src/hub/index.js';
import { trainerPython } from '../../src/runner/python.js';
import { loadTaskData } from '../../src/datasets/index.js';
import { BANKING77_SHA, startDatasetHub } from './dataset-fixture.js';
import type { FakeHub } from './fake-hub.js';
import { SHA_MAIN, SHA_V1, startFakeHub } from './hub-fixture.js';

/**
 * What a fetch writes is read by `huggingface_hub` itself (Python, offline), the library the
 * trainer's transformers loads models through, in the trainer's Python (runner/python.ts: the venv
 * `bash .ci/setup` builds, or $CANARY_AUDIT_PYTHON).
 */
const PYTHON = trainerPython();
const hasPython = existsSync(PYTHON);

const CHECK = `
import json, os, sys
from huggingface_hub import snapshot_download, try_to_load_from_cache
repo, sha = sys.argv[1], sys.argv[2]
by_sha = snapshot_download(repo, revision=sha, local_files_only=True)
by_branch = snapshot_download(repo, revision="main", local_files_only=True)
by_tag = snapshot_download(repo, revision="v1", local_files_only=True)
cfg = try_to_load_from_cache(repo, "config.json", revision="main")
nested = try_to_load_from_cache(repo, "extra/generation_config.json", revision=sha)
try:
    from transformers import AutoConfig
    config = AutoConfig.from_pretrained(repo, revision=sha, local_files_only=True)
    transformers_sees = [type(config).__name__, getattr(config, "_commit_hash", None)]
except ImportError:
    transformers_sees = None
print(json.dumps({"transformers": transformers_sees, "by_sha": by_sha, "by_branch": by_branch, "by_tag": by_tag, "config": open(cfg).read(), "nested": open(nested).read(),
                  "files": sorted(os.path.relpath(os.path.join(d, f), by_sha) for d, _, fs in os.walk(by_sha) for f in fs)}))
`;

let hub: FakeHub;
const cache = mkdtempSync(join(tmpdir(), 'canary-hub-py-'));
beforeAll(async () => {
  hub = await startFakeHub();
});
afterAll(async () => {
  await hub.stop();
  rmSync(cache, { recursive: true, force: true });
});

describe('the cache a fetch writes, read by huggingface_hub', () => {
  it.skipIf(!hasPython)(
    `snapshot_download and try_to_load_from_cache find every file offline${hasPython ? '' : ` (skipped: no ${PYTHON}; run bash .ci/setup)`}`,
    async () => {
      const options = { hubUrl: hub.url, cacheDir: cache, accessToken: null };
      const main = await fetchSnapshot('org/tiny-model', null, options);
      await fetchSnapshot('org/tiny-model', 'v1', options);
      const env = {
        HF_HUB_CACHE: cache,
        HF_HUB_OFFLINE: '1',
        HF_ENDPOINT: 'http://127.0.0.1:1',
        HF_HUB_DISABLE_TELEMETRY: '1',
      };
      const { stdout } = await execa(PYTHON, ['-c', CHECK, 'org/tiny-model', SHA_MAIN], { env });
      const got = JSON.parse(stdout) as Record<string, unknown>;
      expect(got.by_sha).toBe(main.snapshotDir);
      expect(got.by_branch).toBe(main.snapshotDir);
      expect(got.by_tag).toBe(join(cache, 'models--org--tiny-model', 'snapshots', SHA_V1));
      expect(JSON.parse(got.config as string)).toMatchObject({ model_type: 'qwen3' });
      expect(got.nested).toBe('{"do_sample": false}');
      // transformers, when the interpreter has it, loads the config offline at the pinned commit.
      if (got.transformers !== null) expect(got.transformers).toEqual(['Qwen3Config', SHA_MAIN]);
      expect(got.files).toEqual(['config.json', 'extra/generation_config.json', 'model.safetensors', 'tokenizer.json']);
    },
  );
});

const DATASET_CHECK = `
import json, os, sys
from huggingface_hub import snapshot_download, try_to_load_from_cache
repo = sys.argv[1]
snap = snapshot_download(repo, repo_type="dataset", local_files_only=True)
card = try_to_load_from_cache(repo, "README.md", repo_type="dataset")
train = try_to_load_from_cache(repo, "data/train-00000-of-00001.parquet", repo_type="dataset", revision="main")
print(json.dumps({"snapshot": snap, "card": open(card).read()[:3], "train": os.path.getsize(train),
                  "files": sorted(os.path.relpath(os.path.join(d, f), snap) for d, _, fs in os.walk(snap) for f in fs)}))
`;

describe('the dataset cache a load writes, read by huggingface_hub', () => {
  it.skipIf(!hasPython)(
    'snapshot_download(repo_type="dataset") finds the card and the split files offline',
    async () => {
      const datasets = await startDatasetHub();
      try {
        const dir = join(cache, 'datasets-cache');
        const data = await loadTaskData({ repo: 'PolyAI/banking77' }, ['train'], {
          gridDir: cache,
          hubUrl: datasets.url,
          cacheDir: dir,
          accessToken: null,
          offline: false,
        });
        const env = {
          HF_HUB_CACHE: dir,
          HF_HUB_OFFLINE: '1',
          HF_ENDPOINT: 'http://127.0.0.1:1',
          HF_HUB_DISABLE_TELEMETRY: '1',
        };
        const { stdout } = await execa(PYTHON, ['-c', DATASET_CHECK, 'PolyAI/banking77'], { env });
        const got = JSON.parse(stdout) as Record<string, unknown>;
        expect(got.snapshot).toBe(join(dir, 'datasets--PolyAI--banking77', 'snapshots', BANKING77_SHA));
        expect(got.card).toBe('---');
        expect(got.train).toBe(data.provenance.files[0]?.bytes);
        expect(got.files).toEqual(['README.md', 'data/train-00000-of-00001.parquet']);
      } finally {
        await datasets.stop();
      }
    },
  );
});

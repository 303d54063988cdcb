import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { trainerPython } from '../../src/runner/python.js';

/**
 * Build (or reuse) the test models' Hugging Face cache with the trainer's own fixture builders in
 * one Python start: the text models (hf_fixtures), and with `vlm` the vision-language ones too
 * (vlm_fixtures, which imports hf_fixtures relatively: both load as the trainer's `tests`
 * package). Returns the cache folder, or `SKIP <reason>` where the fixtures cannot be built.
 */
export function buildTestHub({ vlm = false }: { vlm?: boolean } = {}): string {
  const script = vlm
    ? 'import sys; sys.path.insert(0, sys.argv[1]); from tests import hf_fixtures as f, vlm_fixtures as v; r = f.missing_reason(); print(r and "SKIP " + r or [f.build_hub(), v.build_vlm_hub()][0])'
    : 'import sys; sys.path.insert(0, sys.argv[1]); from tests import hf_fixtures as f; r = f.missing_reason(); print(r and "SKIP " + r or f.build_hub())';
  return execFileSync(trainerPython(), ['-c', script, join(PACKAGE_ROOT, 'trainer-py')], {
    encoding: 'utf8',
    timeout: 300_000,
  }).trim();
}

/** The environment of a `run` against that cache, offline, with no Redis or artifact root of the caller's. */
export function offlineHubEnv(hub: string): Record<string, string | undefined> {
  return {
    HF_HUB_CACHE: hub,
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    REDIS_URL: undefined,
    CANARY_AUDIT_HOME: undefined,
  };
}

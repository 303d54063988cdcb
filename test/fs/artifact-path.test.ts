import { mkdirSync, readdirSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  ArtifactPathError,
  checkOutputInsideArtifacts,
  resolveInsideArtifacts,
  toArtifactRelative,
} from '../../src/fs/artifact-path.js';
import { createAuditProcessor } from '../../src/worker/audit-processor.js';
import { queueKeys } from '../../src/queue/names.js';
import { createRunProcessor } from '../../src/worker/run-processor.js';
import { localRunner } from '../../src/runner/index.js';
import { fastTuning, removeDir, tempDir } from '../queue/helpers/fixtures.js';

const root = tempDir('paths');
const outside = tempDir('outside');
mkdirSync(join(root, 'audits', 'a', 'runs', 'r'), { recursive: true });
writeFileSync(join(root, 'audits', 'a', 'runs', 'r', 'manifest.json'), '{}');
writeFileSync(join(outside, 'manifest.json'), '{}');
symlinkSync(outside, join(root, 'audits', 'escape'));

afterAll(() => {
  removeDir(root);
  removeDir(outside);
});

describe('resolveInsideArtifacts', () => {
  it('resolves a relative path inside the root', () => {
    expect(resolveInsideArtifacts(root, 'audits/a/runs/r/manifest.json')).toBe(
      join(root, 'audits/a/runs/r/manifest.json'),
    );
  });

  it.each([
    ['/etc/passwd', /must be relative/],
    ['../outside/manifest.json', /leaves the artifact root/],
    ['audits/a/../../../x', /leaves the artifact root/],
    ['', /names no artifact path/],
    ['audits/escape/manifest.json', /through a symlink/],
  ])('refuses %j', (path, pattern) => {
    expect(() => resolveInsideArtifacts(root, path)).toThrow(ArtifactPathError);
    expect(() => resolveInsideArtifacts(root, path)).toThrow(pattern);
  });

  it('accepts a name that merely starts with two dots', () => {
    expect(resolveInsideArtifacts(root, '..hidden/x')).toBe(join(root, '..hidden/x'));
  });
});

describe('toArtifactRelative', () => {
  it('gives POSIX paths relative to the root and refuses paths outside it', () => {
    expect(toArtifactRelative(root, join(root, 'audits', 'a', 'runs', 'r'))).toBe('audits/a/runs/r');
    expect(() => toArtifactRelative(root, outside)).toThrow(/not inside the artifact root/);
  });
});

describe('output folders', () => {
  const runDir = join(root, 'audits', 'a', 'runs', 'linked');
  mkdirSync(runDir, { recursive: true });
  writeFileSync(join(runDir, 'manifest.json'), '{}');

  it('refuses a path under a symlink that leads out, even when the file does not exist yet', () => {
    expect(() => resolveInsideArtifacts(root, 'audits/escape/new/result.json')).toThrow(/through a symlink/);
  });

  it('refuses an output folder that is a symlink out of the root, or holds one', () => {
    const out = join(runDir, 'output');
    symlinkSync(outside, out);
    try {
      expect(() => checkOutputInsideArtifacts(root, out)).toThrow(/through a symlink/);
    } finally {
      unlinkSync(out);
    }
    mkdirSync(join(out, 'scores'), { recursive: true });
    symlinkSync(outside, join(out, 'scores', 'final'));
    expect(() => checkOutputInsideArtifacts(root, out)).toThrow(/scores\/final is a symlink that leads outside/);
    unlinkSync(join(out, 'scores', 'final'));
    symlinkSync(join(root, 'audits', 'a'), join(out, 'checkpoints')); // inside the root: fine
    expect(() => checkOutputInsideArtifacts(root, out)).not.toThrow();
  });

  it('the run processor refuses such a run for good before writing anything', async () => {
    const out = join(runDir, 'output');
    rmSync(out, { recursive: true, force: true });
    symlinkSync(outside, out);
    const before = readdirSync(outside).sort();
    const processor = createRunProcessor({
      artifactsDir: root,
      runner: localRunner({}),
      tuning: fastTuning(),
      host: 'h',
      slot: { gpu: null, threads: 1 },
      cancelledAt: async () => null,
      shuttingDown: () => false,
    });
    const job = {
      id: 'r',
      data: { run_id: 'r', audit_id: 'a', manifest: 'audits/a/runs/linked/manifest.json' },
      attemptsMade: 0,
      opts: {},
    };
    await expect(processor(job as never)).rejects.toThrow(/^bad_job: .*through a symlink/);
    expect(readdirSync(outside).sort()).toEqual(before);
  });

  it('the audit summary writes no failure.json through such a symlink (the reason stays in Redis)', async () => {
    const out = join(runDir, 'output');
    rmSync(out, { recursive: true, force: true });
    symlinkSync(outside, out);
    const before = readdirSync(outside).sort();
    const processor = createAuditProcessor({
      artifactsDir: root,
      keys: queueKeys('t'),
      redis: { hgetall: async () => ({}) } as never,
      runs: { getJob: async () => ({ attemptsMade: 1 }) } as never,
    });
    const job = {
      data: { audit_id: 'a', audit_dir: 'audits/a', runs: [{ run_id: 'linked', cell_id: 'c' }] },
      getChildrenValues: async () => ({}),
      getIgnoredChildrenFailures: async () => ({
        'bull:t:runs:linked': 'bad_job: artifact path resolves (through a symlink) outside the artifact root',
      }),
    };
    const summary = await processor(job as never);
    expect(summary.failed.map((f) => f.run_id)).toEqual(['linked']);
    expect(readdirSync(outside).sort()).toEqual(before);
  });
});

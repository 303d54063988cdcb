import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ArtifactPathError, resolveInsideArtifacts, toArtifactRelative } from '../../src/queue/artifact-path.js';
import { removeDir, tempDir } from './helpers/fixtures.js';

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
    expect(resolveInsideArtifacts(root, 'audits/a/runs/r/manifest.json')).toBe(join(root, 'audits/a/runs/r/manifest.json'));
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

import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  artifactsRootOfAudit,
  artifactsRootOfRun,
  auditDirOf,
  auditIndexPath,
  cacheDirOf,
  manifestPathOf,
  outputDirOf,
  outputDirOfManifest,
  runDirEntry,
  runDirOf,
} from '../src/layout.js';

describe('artifact layout', () => {
  const root = resolve('/data/artifacts');
  const audit = auditDirOf(root, 'audit-0123456789ab');
  const run = runDirOf(audit, 'run-0123456789abcdef');

  it('spells the folders of an audit and a run', () => {
    expect(audit).toBe(join(root, 'audits', 'audit-0123456789ab'));
    expect(auditIndexPath(audit)).toBe(join(audit, 'audit.json'));
    expect(run).toBe(join(audit, 'runs', 'run-0123456789abcdef'));
    expect(join(audit, runDirEntry('run-0123456789abcdef'))).toBe(run);
    expect(manifestPathOf(run)).toBe(join(run, 'manifest.json'));
    expect(outputDirOf(run)).toBe(join(run, 'output'));
    expect(outputDirOfManifest(manifestPathOf(run))).toBe(outputDirOf(run));
    expect(cacheDirOf(root)).toBe(join(root, 'cache'));
  });

  it('finds the artifact root back from an audit or run folder, and nothing outside the layout', () => {
    expect(artifactsRootOfAudit(audit)).toBe(root);
    expect(artifactsRootOfRun(run)).toBe(root);
    expect(artifactsRootOfAudit(join(root, 'elsewhere', 'audit-x'))).toBeNull();
    expect(artifactsRootOfRun(join(audit, 'other', 'run-x'))).toBeNull();
    expect(artifactsRootOfRun(join(root, 'x', 'audit-x', 'runs', 'run-x'))).toBeNull();
  });
});

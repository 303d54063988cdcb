import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';

/**
 * The durability order of writeAudit, the contract `submit` queues on: every staged file durable
 * before any run folder appears in runs/, and the renames durable before writeAudit returns. Each
 * sync is recorded with what runs/ held at that moment.
 */
const syncs: { paths: string[]; runsListed: string[]; auditJson: boolean }[] = [];
let auditDir = '';
vi.mock('../../src/fs/durable.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/fs/durable.js')>();
  return {
    ...real,
    syncPaths: async (paths: readonly string[], options?: Parameters<typeof real.syncPaths>[1]) => {
      const runs = join(auditDir, 'runs');
      syncs.push({
        paths: [...paths],
        runsListed: existsSync(runs) ? readdirSync(runs) : [],
        auditJson: existsSync(join(auditDir, 'audit.json')),
      });
      return real.syncPaths(paths, options);
    },
  };
});

const { planAudit, writeAudit } = await import('../../src/manifest/index.js');
const { syncPaths } = await import('../../src/fs/durable.js');

const root = mkdtempSync(join(tmpdir(), 'canary-durable-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const gridPath = join(root, 'grid.yaml');
writeFileSync(
  gridPath,
  'name: d\naxes: {visibility: [visible, redacted], dose: [1, 4]}\ntraining: {batch_size: 4, updates: 40, lr: 0.001}\nutility: {rows: 4}\n',
);

describe('writeAudit durability order', () => {
  it('syncs the staged files before any run folder appears, and the renames before it returns', async () => {
    const plan = await planAudit(gridPath);
    auditDir = join(root, 'out', 'audits', plan.auditId);
    syncs.length = 0;
    const written = await writeAudit(plan, join(root, 'out'));
    expect(written.runs).toHaveLength(4);
    expect(syncs).toHaveLength(2);
    const [data, renames] = syncs as [(typeof syncs)[0], (typeof syncs)[0]];
    // First pass: nothing in runs/ yet; every staged manifest and rows file (and its folder) is in it.
    expect(data.runsListed).toEqual([]);
    expect(data.paths.filter((p) => p.endsWith('/manifest.json'))).toHaveLength(4);
    expect(data.paths.filter((p) => p.endsWith('/rows.jsonl'))).toHaveLength(4);
    for (const p of data.paths) expect(p.startsWith(join(auditDir, '.tmp'))).toBe(true);
    // Second pass: every folder is in place and audit.json written; runs/ itself is synced.
    expect(renames.runsListed.sort()).toEqual(written.runs.map((r) => r.runId).sort());
    expect(renames.auditJson).toBe(true);
    expect(renames.paths).toEqual([join(auditDir, 'runs'), auditDir]);
    expect(existsSync(join(auditDir, '.tmp'))).toBe(false);

    // Written again: nothing staged, the folders are synced once more before a caller queues them.
    syncs.length = 0;
    const again = await writeAudit(await planAudit(gridPath), join(root, 'out'));
    expect(again.runs.every((r) => !r.created)).toBe(true);
    expect(syncs.map((s) => s.paths)).toEqual([[join(auditDir, 'runs'), auditDir]]);
  });
});

describe('syncPaths', () => {
  it('fsyncs each path when asked to, and names a path that is not there', async () => {
    const file = join(root, 'f.txt');
    writeFileSync(file, 'x\n');
    await expect(syncPaths([file, root], { syncfs: false })).resolves.toBe('fsync');
    await expect(syncPaths([file, join(root, 'missing.txt')], { syncfs: false })).rejects.toThrow(/missing\.txt/);
    await expect(syncPaths([])).resolves.toBeNull();
  });

  it.runIf(process.platform === 'linux')('makes them durable with one syncfs on Linux', async () => {
    await expect(syncPaths([root])).resolves.toBe('syncfs');
  });
});

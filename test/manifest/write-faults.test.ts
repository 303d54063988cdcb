import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { explainWriteError } from '../../src/fs/index.js';
import { planAudit, writeAudit } from '../../src/manifest/index.js';

/** File-system failures while writing an audit: one line naming the path and the fix, exit 1. */
const root = mkdtempSync(join(tmpdir(), 'canary-write-faults-'));
const small = join(root, 'small');
let mounted = false;
afterAll(() => {
  if (mounted) execFileSync('umount', [small]);
  rmSync(root, { recursive: true, force: true });
});

const GRID =
  'name: f\naxes: {visibility: [visible, redacted], dose: [1, 4]}\ntraining: {batch_size: 4, updates: 40, lr: 0.001}\nutility: {rows: 4}\n';
const gridPath = join(root, 'grid.yaml');
writeFileSync(gridPath, GRID);

/** A 64 KiB file system to fill, where the machine lets us mount one (root in a container). */
function mountTiny(): boolean {
  mkdirSync(small, { recursive: true });
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', small], { stdio: 'ignore' });
    return (mounted = true);
  } catch {
    return false;
  }
}

async function capture(args: string[]): Promise<{ code: number; err: string }> {
  let err = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string) => {
    err += chunk;
    return true;
  }) as typeof process.stderr.write;
  const stdout = process.stdout.write.bind(process.stdout);
  process.stdout.write = (() => true) as typeof process.stdout.write;
  try {
    return { code: await main(args), err };
  } finally {
    process.stderr.write = write;
    process.stdout.write = stdout;
  }
}

describe('plan --out on a failing file system', () => {
  it.skipIf(!mountTiny())('a full disk (ENOSPC): exit 1, one line naming the audit folder and the fix', async () => {
    const { code, err } = await capture(['plan', gridPath, '--out', small]);
    expect(code).toBe(1);
    expect(err).toMatch(
      new RegExp(
        `^canary-audit: cannot write the audit to ${small}/audits/audit-\\w+: no space left on the device \\(ENOSPC\\); free space there or choose another folder\\n$`,
      ),
    );
    // Nothing half-written is left in the staging folder (was: .tmp/shared~…-pretrain.jsonl, or a
    // 0-byte …-utility.jsonl on a fuller disk).
    const [audit] = readdirSync(join(small, 'audits'));
    const staging = join(small, 'audits', audit!, '.tmp');
    expect(existsSync(staging) ? readdirSync(staging) : []).toEqual([]);
  });

  it('names the path and the fix for permission errors (EACCES), whatever the operation', () => {
    const error = Object.assign(new Error("EACCES: permission denied, mkdir '/srv/x'"), {
      code: 'EACCES',
      path: '/srv/x',
    });
    expect(explainWriteError(error, '/srv', 'write the audit to')?.message).toBe(
      "cannot write the audit to /srv/x: permission denied (EACCES); fix the folder's permissions (or owner) or choose another folder",
    );
    expect(explainWriteError(new Error('boom'), '/srv')).toBeNull();
  });

  it('removes staging folders a killed write left behind (this host, process gone)', async () => {
    const plan = await planAudit(gridPath);
    const staging = join(root, 'out', 'audits', plan.auditId, '.tmp');
    mkdirSync(join(staging, `run~${hostname()}~999999999~dead`), { recursive: true });
    writeFileSync(join(staging, `pretrain~${hostname()}~999999999~x.jsonl`), 'x');
    const alive = join(staging, `run~${hostname()}~${process.pid}~mine`);
    mkdirSync(alive);
    await writeAudit(plan, join(root, 'out'));
    expect(readdirSync(staging)).toEqual([`run~${hostname()}~${process.pid}~mine`]);
    rmSync(alive, { recursive: true });
    await writeAudit(plan, join(root, 'out'));
    expect(existsSync(staging)).toBe(false);
  });
});

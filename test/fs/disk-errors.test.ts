import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { explainWriteError } from '../../src/fs/write-error.js';
import { writeReport } from '../../src/report/index.js';
import { buildStudyAudit } from '../fixtures/study-audit.js';

/**
 * Failing disks in one line each: a read-only file system (Node's recursive mkdir says ENOENT
 * there) and a full one, on real tmpfs mounts when this process may mount (root), else simulated.
 */
const root = mkdtempSync(join(tmpdir(), 'canary-disk-errors-'));
const mounts: string[] = [];

function tryMount(options: string): string | null {
  const dir = mkdtempSync(join(root, 'mnt-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { stdio: 'ignore' });
  } catch {
    return null;
  }
  mounts.push(dir);
  return dir;
}
function unmount(dir: string): void {
  execFileSync('umount', [dir], { stdio: 'ignore' });
  mounts.splice(mounts.indexOf(dir), 1);
}
const canMount = (() => {
  const d = tryMount('size=64k');
  if (d === null) return false;
  unmount(d);
  return true;
})();

afterAll(() => {
  for (const d of [...mounts]) unmount(d);
  rmSync(root, { recursive: true, force: true });
});

let err = '';
afterEach(() => {
  vi.restoreAllMocks();
  err = '';
});
function captureStderr(): void {
  vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    err += String(chunk);
    return true;
  });
}

const GRID = `name: disk
axes:
  visibility: [visible]
  dose: [1]
  model: [{backend: tiny, label: tiny}]
training: {batch_size: 2, updates: 4, lr: 0.001}
canaries: {focal: 1, held_out: 1}
utility: {rows: 1}
`;

describe('a read-only disk', () => {
  it('explains the ENOENT of a recursive mkdir by the folder that exists above it', () => {
    const ro = mkdtempSync(join(root, 'sim-'));
    // What Node reports for mkdir -p under a read-only mount; the probe finds the real reason.
    const enoent = Object.assign(new Error(`ENOENT: no such file or directory, mkdir '${ro}/a/b'`), {
      code: 'ENOENT',
      syscall: 'mkdir',
      path: join(ro, 'a', 'b'),
    });
    expect(explainWriteError(enoent, ro)).toBeNull(); // a writable folder: ENOENT is not explained away
    const real = tryMount('size=64k,ro');
    if (real === null) return;
    const onRo = Object.assign(new Error('ENOENT'), { code: 'ENOENT', syscall: 'mkdir', path: join(real, 'a', 'b') });
    expect(explainWriteError(onRo, real, 'write the audit to')?.message).toBe(
      `cannot write the audit to ${real}: read-only file system (EROFS); choose a writable folder`,
    );
    unmount(real);
  });

  it.skipIf(!canMount)('`plan --out` on a read-only mount: one line naming the path and the fix, exit 1', async () => {
    const grid = join(root, 'grid.yaml');
    writeFileSync(grid, GRID);
    const ro = tryMount('size=64k,ro') as string;
    captureStderr();
    const code = await main(['plan', grid, '--out', join(ro, 'artifacts')]);
    expect({ code, err }).toMatchObject({ code: 1 });
    expect(err).toBe(
      `canary-audit: cannot write the audit to ${ro}: read-only file system (EROFS); choose a writable folder\n`,
    );
    unmount(ro);
  });
});

/** Bytes a set of files takes on tmpfs (whole pages). */
function pages(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const st = statSync(join(dir, name));
    if (st.isFile()) total += Math.ceil(st.size / 4096) * 4096;
  }
  return total;
}
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of (readdirSync(dir, { recursive: true }) as string[]).sort()) {
    const path = join(dir, name);
    if (statSync(path).isFile()) out[relative(dir, path)] = readFileSync(path, 'utf8');
  }
  return out;
}

describe.skipIf(!canMount)('a full disk while the report is written', () => {
  it('fails in one line naming the folder, and leaves the previous report whole (report.html included)', async () => {
    const audit = await buildStudyAudit(join(root, 'study'));
    const reference = join(root, 'reference-report');
    await writeReport({ auditDir: audit.auditDir, outDir: reference, seed: 3, resamples: 50 });
    const need = pages(reference);
    // Room for one report and a half: the first fits, a second (staged beside the first) cannot.
    const disk = tryMount(`size=${Math.ceil((need * 1.5) / 4096) * 4096}`) as string;
    const out = join(disk, 'report');
    await writeReport({ auditDir: audit.auditDir, outDir: out, seed: 3, resamples: 50 });
    const before = snapshot(out);
    expect(Object.keys(before)).toContain('report.html');
    // Another run's files fill the rest of the disk... then the report is written again.
    const error = await writeReport({ auditDir: audit.auditDir, outDir: out, seed: 4, resamples: 50 }).catch(
      (e: Error) => e,
    );
    expect((error as Error).message).toMatch(
      new RegExp(
        `^cannot write the report to ${out}.*: no space left on the device \\(ENOSPC\\); free space there or choose another folder$`,
      ),
    );
    expect(snapshot(out)).toEqual(before);
    expect(readdirSync(out).filter((n) => n.startsWith('.staging-'))).toEqual([]);
    unmount(disk);
  });

  it('a first report that does not fit leaves no report files at all', async () => {
    const audit = await buildStudyAudit(join(root, 'study2'));
    const disk = tryMount('size=16k') as string;
    const out = join(disk, 'report');
    mkdirSync(out);
    const error = await writeReport({ auditDir: audit.auditDir, outDir: out, seed: 3, resamples: 50 }).catch(
      (e: Error) => e,
    );
    expect((error as Error).message).toMatch(/no space left on the device \(ENOSPC\)/);
    expect(readdirSync(out)).toEqual([]);
    unmount(disk);
  });
});

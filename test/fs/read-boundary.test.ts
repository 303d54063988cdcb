import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openInside, readInside, readInsideSync, ReadBoundaryError } from '../../src/fs/read-boundary.js';
import { removeDir, tempDir } from '../queue/helpers/fixtures.js';

const root = tempDir('read-boundary');
afterAll(() => removeDir(root));

const inside = join(root, 'audit');
mkdirSync(join(inside, 'report'), { recursive: true });
writeFileSync(join(inside, 'report', 'report.html'), '<p>ok</p>');
writeFileSync(join(root, 'outside.txt'), 'secret');
symlinkSync(join(root, 'outside.txt'), join(inside, 'out-link'));
symlinkSync('/dev/zero', join(inside, 'zero'));
symlinkSync(join(inside, 'report', 'report.html'), join(inside, 'in-link'));
symlinkSync('report', join(inside, 'report-dir-link'));
execFileSync('mkfifo', [join(inside, 'fifo')]);
writeFileSync(join(inside, 'big'), Buffer.alloc(2000));
symlinkSync('loop-b', join(inside, 'loop-a'));
symlinkSync('loop-a', join(inside, 'loop-b'));

const opts = { maxBytes: 1000, what: 'report' };

/** Both the asynchronous and the synchronous reader, as the callers use them. */
const readers = {
  async: (path: string) => readInside(inside, path, opts),
  sync: async (path: string) => readInsideSync(inside, path, opts),
};

describe.each(Object.entries(readers))('the read boundary (%s)', (_, read) => {
  it('reads a regular file inside the root, by a relative or an absolute path, and through a link that stays inside', async () => {
    expect((await read('report/report.html')).toString()).toBe('<p>ok</p>');
    expect((await read(join(inside, 'report', 'report.html'))).toString()).toBe('<p>ok</p>');
    expect((await read('in-link')).toString()).toBe('<p>ok</p>');
    expect((await read('report-dir-link/report.html')).toString()).toBe('<p>ok</p>');
  });

  it('refuses a symlink that leads out of the root, naming the file and where it leads', async () => {
    const error = await read('out-link').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReadBoundaryError);
    expect((error as Error).message).toMatch(
      /out-link: report resolves \(through a symlink\) to .*outside\.txt, outside .*audit; not read/,
    );
  });

  it('refuses a path that climbs out of the root', async () => {
    await expect(read('../outside.txt')).rejects.toThrow(/outside\.txt: report lies outside .*audit; not read/);
  });

  it('refuses a FIFO without waiting for a writer, and a device', async () => {
    // A FIFO opened for reading blocks until a writer comes; the boundary opens it non-blocking
    // and refuses it from fstat. (No writer ever comes here: the old read hung forever.)
    await expect(read('fifo')).rejects.toThrow(/fifo: report is a FIFO \(named pipe\), not a regular file; not read/);
    // /dev/zero: outside the root, and a device.
    await expect(read('zero')).rejects.toThrow(/zero: report resolves \(through a symlink\) to \/dev\/zero, outside/);
    expect(() => readInsideSync('/dev', 'zero', opts)).toThrow(
      /\/dev\/zero: report is a character device, not a regular file; not read/,
    );
  });

  it('refuses a directory and a file over the cap, and names a missing one', async () => {
    await expect(read('report')).rejects.toThrow(/report: report is a directory, not a regular file/);
    await expect(read('big')).rejects.toThrow(/big: report holds 2\.0 kB, over the 1\.0 kB cap; not read/);
    await expect(read('gone.html')).rejects.toThrow(/gone\.html: no such report/);
  });

  it('says what to do about a file it cannot read: a symlink loop, a path through a file', async () => {
    await expect(read('loop-a')).rejects.toThrow(
      /loop-a: report is a symlink loop; not read — point the link at a regular file$/,
    );
    await expect(read('big/x')).rejects.toThrow(
      /big\/x: report cannot be read \(ENOTDIR\); make it and its folders readable by this user \(ls -ld .*big\/x\)$/,
    );
  });
});

describe('openInside', () => {
  it('hands back the open handle and the size fstat gave, for a caller that reads part of the file', async () => {
    const opened = await openInside(inside, 'report/report.html', opts);
    try {
      expect(opened.size).toBe(9);
      const buf = Buffer.alloc(2);
      await opened.handle.read(buf, 0, 2, 7);
      expect(buf.toString()).toBe('p>');
    } finally {
      await opened.handle.close();
    }
  });
});

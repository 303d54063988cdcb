import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { writeFileAtomic } from './atomic.js';

/**
 * A set of files that appears together or not at all: each is written (and fsynced) into a private
 * staging folder inside `dir`, and only once every one is on disk are they renamed into place
 * (renames need no space, so a full disk fails while staging, before any file is replaced). On
 * failure the staging folder is removed and `dir` keeps what it had. `first` names files renamed
 * before the others, so that file is never missing while the others are there.
 */
export class StagedFiles {
  private readonly staged: string[] = [];

  private constructor(
    readonly dir: string,
    private readonly stage: string,
  ) {}

  static async open(dir: string): Promise<StagedFiles> {
    await mkdir(dir, { recursive: true });
    return new StagedFiles(dir, await mkdtemp(join(dir, '.staging-')));
  }

  /** Stage `path` (a file under `dir`). */
  async write(path: string, data: string | Uint8Array): Promise<void> {
    const rel = relative(this.dir, path);
    await writeFileAtomic(join(this.stage, rel), data);
    this.staged.push(rel);
  }

  /** Stage JSON as writeJsonAtomic writes it: two-space indented, trailing newline. */
  json(path: string, value: unknown): Promise<void> {
    return this.write(path, `${JSON.stringify(value, null, 2)}\n`);
  }

  /** Move every staged file into place (`first` before the rest) and remove the staging folder. */
  async commit(first: string[] = []): Promise<void> {
    const head = first.map((p) => relative(this.dir, p)).filter((rel) => this.staged.includes(rel));
    for (const rel of [...head, ...this.staged.filter((r) => !head.includes(r))]) {
      const target = join(this.dir, rel);
      await mkdir(dirname(target), { recursive: true });
      await rename(join(this.stage, rel), target);
    }
    await this.abort();
  }

  async abort(): Promise<void> {
    await rm(this.stage, { recursive: true, force: true });
  }
}

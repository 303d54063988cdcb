import type { FetchProgress } from '../hub/index.js';

/**
 * Download progress on stderr: on a terminal one line redrawn at most every 200 ms; otherwise a
 * line when a download starts and one every 10 s while it lasts (logs stay readable).
 */
export class FetchProgressView implements FetchProgress {
  private last = 0;
  private drawn = false;

  constructor(
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly tty: boolean = Boolean(process.stderr.isTTY),
  ) {}

  file(path: string, size: number, state: 'cached' | 'linked' | 'download'): void {
    this.endLine();
    if (state === 'download') {
      this.last = Date.now();
      if (!this.tty) this.out.write(`  downloading ${path} (${formatBytes(size)})\n`);
    }
  }

  bytes(path: string, done: number, total: number): void {
    const now = Date.now();
    if (now - this.last < (this.tty ? 200 : 10_000) && done < total) return;
    this.last = now;
    const pct = total > 0 ? ` (${Math.floor((100 * done) / total)}%)` : '';
    if (this.tty) {
      this.out.write(`\r  ${path} ${formatBytes(done)} / ${formatBytes(total)}${pct}\u001b[K`);
      this.drawn = true;
    } else if (done < total) {
      this.out.write(`  ${path}: ${formatBytes(done)} / ${formatBytes(total)}${pct}\n`);
    }
  }

  /** Finish a redrawn line before anything else is printed. */
  endLine(): void {
    if (this.drawn) this.out.write('\n');
    this.drawn = false;
  }
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

import { terminalSafe } from '../../errors.js';
import { renderBars, renderChanges } from './status-format.js';
import type { AuditStatus } from '../../queue/status.js';

/**
 * Repeated status output: on a terminal, bars redrawn in place; elsewhere (logs, CI), one line per
 * change. `run` writes it to stderr (stdout stays for --json); `status --watch` to stdout.
 */
export class LiveView {
  private previous: AuditStatus[] | null = null;
  private drawnLines = 0;

  /** `slots`: the worker slots running the audits shown, when known (`run` on its private Redis). */
  constructor(
    private readonly stream: NodeJS.WriteStream,
    private readonly tty: boolean = Boolean(stream.isTTY),
    private readonly slots?: number,
  ) {}

  show(snapshot: AuditStatus[]): void {
    if (this.tty) {
      const text = terminalSafe(renderBars(snapshot, this.stream.columns ?? 100, this.slots));
      // Move up over the previous frame and clear to the end of the screen, then draw.
      const up = this.drawnLines > 0 ? `\x1b[${this.drawnLines}A\x1b[0J` : '';
      this.stream.write(`${up}${text}`);
      this.drawnLines = text.split('\n').length - 1;
    } else {
      const text = terminalSafe(renderChanges(this.previous, snapshot, new Date(), this.slots));
      if (text) this.stream.write(text);
    }
    this.previous = snapshot;
  }
}

import type { ProgressEvent } from '../contracts/progress.js';
import { describeSchemaErrors, validate } from '../schemas/index.js';

/**
 * The trainer's stdout protocol (schemas/progress.schema.json): one JSON object per line. A line
 * that is not a valid event is reported, never guessed at: the caller logs it beside the
 * trainer's stderr, and the run goes on (a stray print must not kill an hours-long run).
 */
export type ParsedLine = { ok: true; event: ProgressEvent } | { ok: false; line: string; reason: string };

export function parseProgressLine(line: string): ParsedLine {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { ok: false, line, reason: 'not JSON' };
  }
  const errors = validate('progress', value);
  if (errors.length > 0) {
    return { ok: false, line, reason: describeSchemaErrors(errors).slice(0, 3).join('; ') };
  }
  return { ok: true, event: value as ProgressEvent };
}

/** Longest stdout line kept, in characters: a runaway line is cut rather than buffered forever. */
export const MAX_LINE = 1 << 20;

/**
 * Splits a byte stream into lines. Chunks from a pipe end anywhere, including inside a multi-byte
 * character or between \r and \n; the splitter keeps the remainder for the next chunk.
 */
export class LineSplitter {
  private pending = '';
  private readonly decoder = new TextDecoder('utf-8');

  push(chunk: Uint8Array | string): string[] {
    this.pending += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true });
    const parts = this.pending.split('\n');
    this.pending = parts.pop() ?? '';
    if (this.pending.length > MAX_LINE) {
      parts.push(this.pending.slice(0, MAX_LINE));
      this.pending = '';
    }
    return parts.map(stripCr).filter((l) => l.trim() !== '');
  }

  /** The last line, if the stream ended without a newline. */
  end(): string[] {
    const rest = this.pending + this.decoder.decode();
    this.pending = '';
    return rest.trim() === '' ? [] : [stripCr(rest)];
  }
}

function stripCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

import { describe, expect, it } from 'vitest';
import { LineSplitter, MAX_LINE, parseProgressLine } from '../../src/runner/progress-protocol.js';

describe('LineSplitter', () => {
  it('joins lines cut anywhere, including inside a multi-byte character and between \\r and \\n', () => {
    const bytes = Buffer.from('{"a":"é"}\r\nsecond line\n\nthird', 'utf8');
    const splitter = new LineSplitter();
    const lines: string[] = [];
    for (let i = 0; i < bytes.length; i += 3) lines.push(...splitter.push(bytes.subarray(i, i + 3)));
    lines.push(...splitter.end());
    expect(lines).toEqual(['{"a":"é"}', 'second line', 'third']);
  });

  it('cuts a runaway line instead of buffering it forever', () => {
    const splitter = new LineSplitter();
    const out = splitter.push('x'.repeat(MAX_LINE + 10));
    expect(out).toHaveLength(1);
    expect(out[0]).toHaveLength(MAX_LINE);
  });
});

describe('parseProgressLine', () => {
  it('accepts schema-valid events', () => {
    const parsed = parseProgressLine(
      '{"v":1,"event":"step","t":1.5,"update":3,"total":10,"loss":0.5,"lr":0.001,"rows_per_s":12}',
    );
    expect(parsed).toEqual({
      ok: true,
      event: { v: 1, event: 'step', t: 1.5, update: 3, total: 10, loss: 0.5, lr: 0.001, rows_per_s: 12 },
    });
  });

  it('accepts the wait for a base another trainer builds, and refuses one that does not say what it waits for', () => {
    const line =
      '{"v":1,"event":"wait","t":2,"on":"base_model","key":"ab12","holder_pid":77,"holder_run":"run-0123456789abcdef","ended":false}';
    expect(parseProgressLine(line)).toMatchObject({
      ok: true,
      event: { event: 'wait', on: 'base_model', holder_run: 'run-0123456789abcdef', ended: false },
    });
    expect(parseProgressLine('{"v":1,"event":"wait","t":3,"on":"base_model","ended":true,"waited_s":69.2}').ok).toBe(
      true,
    );
    expect(parseProgressLine('{"v":1,"event":"wait","t":2,"ended":false}').ok).toBe(false);
    expect(parseProgressLine('{"v":1,"event":"wait","t":2,"on":"the weather","ended":false}').ok).toBe(false);
  });

  it('reports non-JSON lines and events that break the schema', () => {
    expect(parseProgressLine('Loading checkpoint shards: 50%')).toMatchObject({ ok: false, reason: 'not JSON' });
    const bad = parseProgressLine('{"v":1,"event":"step","t":1,"update":0,"total":10}');
    expect(bad.ok).toBe(false);
    expect(bad.ok ? '' : bad.reason).toMatch(/update|loss|required/);
    expect(parseProgressLine('{"v":2,"event":"done","t":1,"result":"r","wall_s":1}').ok).toBe(false);
  });
});

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { quoteValue, terminalSafe } from '../../src/errors.js';
import { parseGrid } from '../../src/grid/load.js';
import { LiveView } from '../../src/cli/views/live-view.js';
import type { AuditStatus } from '../../src/queue/status.js';

/** Terminal escapes in user strings: refused in grid names and labels, escaped wherever printed. */
const root = mkdtempSync(join(tmpdir(), 'canary-control-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

const HOSTILE = '\u001b]0;PWNED\u0007\u001b[31mRED';
const grid = (visibility: string) => `name: ctl
axes:
  visibility: ${visibility}
  dose: [1]
  model: [{backend: tiny, label: tiny}]
training: {batch_size: 2, updates: 4, lr: 0.001}
canaries: {focal: 1, held_out: 1}
utility: {rows: 1}
`;

describe('control characters', () => {
  it.each([
    ['a visibility name', '[{kind: visible, name: "\\e]0;PWNED\\a\\e[31mRED"}]', 'axes.visibility[0].name', 'U+001B'],
    ['a model label', '[visible]\n  model: [{backend: tiny, label: "ti\\tny"}]', 'axes.model[0].label', 'U+0009'],
  ])('in %s are refused in one line naming the field (exit 2)', async (_what, visibility, field, code) => {
    let text = grid(visibility);
    if (visibility.includes('model:')) text = text.replace('  model: [{backend: tiny, label: tiny}]\n', '');
    const file = join(root, `${field}.yaml`);
    writeFileSync(file, text);
    expect(() => parseGrid(file, text)).toThrow(
      new RegExp(`${field.replace(/[[\].]/g, '\\$&')}.*contains a control character \\(${code.replace('+', '\\+')}\\)`),
    );
    let err = '';
    vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      err += String(chunk);
      return true;
    });
    expect(await main(['plan', file])).toBe(2);
    expect(err.split('\n').filter(Boolean)).toHaveLength(1);
    expect(err).not.toContain('\u001b');
  });

  it.each([
    ['U+009B (a C1 CSI)', '\\x9b31mRED', '\u009b', 'U+009B'],
    ['U+0085 (a C1 next line)', 'a\\Nb', '\u0085', 'U+0085'],
    ['U+202E (a bidi override)', 'abc\\u202Eexe.txt', '\u202e', 'U+202E'],
  ])("%s in a name is refused, and plan's error line shows it escaped, never raw", async (_what, yaml, raw, code) => {
    const file = join(root, `c1-${code}.yaml`);
    writeFileSync(file, grid(`[{kind: visible, name: "${yaml}"}]`));
    let err = '';
    vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      err += String(chunk);
      return true;
    });
    expect(await main(['plan', file])).toBe(2);
    expect(err.split('\n').filter(Boolean)).toHaveLength(1);
    expect(err).toContain(`contains a control character (${code})`);
    expect(err).toContain(`\\u${code.slice(2).toLowerCase()}`);
    expect(err).not.toContain(raw);
  });

  it('a grid name with an escape is refused too (the schema pattern says so)', () => {
    const text = grid('[visible]').replace('name: ctl', 'name: "c\\etl"');
    expect(() => parseGrid(join(root, 'n.yaml'), text)).toThrow(/name.*(control character|does not match)/);
  });

  it('terminalSafe shows control characters as escapes and keeps newlines and tabs', () => {
    expect(terminalSafe(`a${HOSTILE}\tb\n`)).toBe('a\\u001b]0;PWNED\\u0007\\u001b[31mRED\tb\n');
    expect(terminalSafe('caf\u00e9 \u2713')).toBe('caf\u00e9 \u2713');
    expect(terminalSafe('a\u009b31mb\u0085c\u202etxt.exe\u2066d\u2028e')).toBe(
      'a\\u009b31mb\\u0085c\\u202etxt.exe\\u2066d\\u2028e',
    );
    expect(quoteValue('x\u009by\u202ez')).toBe('"x\\u009by\\u202ez"');
  });

  it('status views (bars and change lines) escape what an audit in Redis carries', () => {
    const audit: AuditStatus = {
      audit_id: 'audit-000000000001',
      name: HOSTILE,
      state: 'running',
      submitted: new Date().toISOString(),
      cancelled_at: null,
      counts: { failed: 1 },
      runs: [
        {
          run_id: 'run-1',
          cell_id: `dose=1,visibility=${HOSTILE}`,
          state: 'failed',
          attempts_made: 1,
          max_attempts: 1,
          progress: null,
          failure: `crash: ${HOSTILE}`,
          result: null,
          started: null,
          finished: null,
        },
      ],
      summary: null,
    };
    for (const tty of [true, false]) {
      let written = '';
      const stream = {
        isTTY: tty,
        columns: 100,
        write: (s: string) => ((written += s), true),
      } as unknown as NodeJS.WriteStream;
      new LiveView(stream, tty).show([audit]);
      expect(written).toContain('\\u001b]0;PWNED');
      expect(written).not.toContain('\u0007');
      expect(written.replace(/\u001b\[\d+A\u001b\[0J/g, '')).not.toContain('\u001b');
    }
    // C1 controls and a bidi override, in the name status prints.
    const sly = {
      ...audit,
      name: 'evil\u009b31m\u0085\u202eexe.txt',
      runs: [{ ...audit.runs[0]!, failure: 'crash \u202e' }],
    };
    for (const tty of [true, false]) {
      let written = '';
      const stream = {
        isTTY: tty,
        columns: 100,
        write: (s: string) => ((written += s), true),
      } as unknown as NodeJS.WriteStream;
      new LiveView(stream, tty).show([sly]);
      expect(written).toContain('evil\\u009b31m\\u0085\\u202eexe.txt');
      expect(written).not.toMatch(/[\u0085\u009b\u202e]/);
    }
  });
});

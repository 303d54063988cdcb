import { describe, expect, it } from 'vitest';
import { compactTable, compactTables, type Table } from '../../src/report/document.js';

const columns = ['Cell', 'Dose', 'Ceiling', 'Recovered (prefill)', 'n'];
const redacted: Table = {
  caption: 'Visibility: redacted',
  columns,
  rows: [
    ['a', '8', '13.29', '0/6 [0.00, 0.46]', '3 canaries (crossed)'],
    ['b', '8', '13.29', '3/6 [0.19, 0.81]', '4 canaries (crossed)'],
  ],
};
const visible: Table = {
  caption: 'Visibility: visible',
  columns,
  rows: [
    ['c', '8', '13.29', '0/3 [0.00, 0.56]', '3 canaries (one run)'],
    ['d', '8', '13.29', '0/3 [0.00, 0.56]', '3 canaries (one run)'],
  ],
};

describe('compactTables: one column set for the tables of a section', () => {
  it('keeps a column constant in one table but not in the other, in both', () => {
    // Alone, the visible table would lose "Recovered (prefill)" (0/3 in both rows).
    expect(compactTable(visible).columns).not.toContain('Recovered (prefill)');
    const [r, v] = compactTables([redacted, visible]);
    expect(r?.columns).toEqual(['Cell', 'Recovered (prefill)', 'n']);
    expect(v?.columns).toEqual(r?.columns);
    expect(v?.rows).toEqual([
      ['c', '0/3 [0.00, 0.56]', '3 canaries'],
      ['d', '0/3 [0.00, 0.56]', '3 canaries'],
    ]);
  });

  it('says what every table repeats once, under the last, and each table its own annotation once', () => {
    const [r, v] = compactTables([redacted, visible]);
    expect(r?.notes).toEqual(['In every row of this table — n: crossed.']);
    expect(v?.notes).toEqual([
      'In every row of this table — n: one run.',
      'In every row of these 2 tables — Dose: 8. Ceiling: 13.29.',
    ]);
    for (const note of [...(r?.notes ?? []), ...(v?.notes ?? [])]) expect(note.match(/in every row/gi)).toHaveLength(1);
  });

  it('compacts tables with other columns apart, and leaves a lone one-row table whole', () => {
    const other: Table = {
      columns: ['Run', 'Rows'],
      rows: [
        ['r1', '8'],
        ['r2', '8'],
      ],
    };
    const one: Table = { columns: ['Cell', 'Dose'], rows: [['a', '8']] };
    const [r, o, s] = compactTables([redacted, other, one]);
    expect(r?.columns).toEqual(['Cell', 'Recovered (prefill)', 'n']);
    expect(r?.notes).toEqual(['In every row — Dose: 8. Ceiling: 13.29. n: crossed.']);
    expect(o).toEqual({ columns: ['Run'], rows: [['r1'], ['r2']], notes: ['In every row — Rows: 8.'] });
    expect(s).toEqual(one);
  });

  it('names a column every row leaves empty as not in this grid', () => {
    const t: Table = {
      columns: ['Cell', 'Per-run medians'],
      rows: [
        ['a', '—'],
        ['b', '—'],
      ],
    };
    expect(compactTable(t).notes).toEqual(['In every row — Per-run medians: — (not in this grid).']);
  });
});

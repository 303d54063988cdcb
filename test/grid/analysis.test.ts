import { describe, expect, it } from 'vitest';
import { parseGrid } from '../../src/grid/index.js';
import { BASE, expectOneError, inputErrors } from './helpers.js';

const F = 'grids/analysis.yaml';

describe("grid analysis: the verdicts' equivalence margin", () => {
  it('takes margin_bits and keeps the audit id: the margin changes how the runs are read, not the runs', () => {
    const plain = parseGrid(F, BASE);
    const wide = parseGrid(F, `${BASE}analysis:\n  margin_bits: 2.5\n`);
    expect(wide.doc.analysis?.margin_bits).toBe(2.5);
    expect(wide.sha256).toBe(plain.sha256);
  });

  it('refuses a margin that is not a positive number, naming the field', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}analysis:\n  margin_bits: 0\n`)),
      `${F}:10:16: analysis.margin_bits: `,
      '0',
    );
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}analysis:\n  margin: 1\n`)),
      `${F}:10:3: analysis`,
      'margin',
    );
  });
});

describe('grid analysis: privacy readout settings', () => {
  it('takes threshold_strategy and extrapolate, keeping the audit id', () => {
    const plain = parseGrid(F, BASE);
    const g = parseGrid(F, `${BASE}analysis:\n  threshold_strategy: multisplit\n  extrapolate: true\n`);
    expect(g.doc.analysis).toMatchObject({ threshold_strategy: 'multisplit', extrapolate: true });
    expect(g.sha256).toBe(plain.sha256);
  });

  it('refuses an unknown strategy, naming the field', () => {
    expectOneError(
      inputErrors(() => parseGrid(F, `${BASE}analysis:\n  threshold_strategy: holm\n`)),
      `${F}:10:23: analysis.threshold_strategy`,
      'holm',
    );
  });
});

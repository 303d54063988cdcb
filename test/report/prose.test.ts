import { describe, expect, it } from 'vitest';
import {
  PAIRED_NOTE,
  privacyNote,
  prose,
  RECOVERY_NOTE,
  resamplingNote,
  TASK_METRICS_NOTE,
} from '../../src/report/prose.js';
import type { ReportSummary } from '../../src/report/summary.js';

describe('report prose', () => {
  it('joins a line break and its indentation into one space, keeps values, trims the ends', () => {
    const n = 3;
    expect(prose`
      one ${n}
        two, ${'x y'}  three
    `).toBe('one 3 two, x y  three');
  });

  it('renders every paragraph as one line with single spaces and its values in place', () => {
    const settings = {
      confidence: 0.9,
      resamples: 2000,
      seed: 7,
      seed_axes: [],
    } as unknown as ReportSummary['settings'];
    const notes = [
      resamplingNote(settings),
      RECOVERY_NOTE,
      PAIRED_NOTE,
      TASK_METRICS_NOTE,
      privacyNote({ probe_kind: 'hidden', epsilon: { confidence: 0.95, delta: 1e-5 } }),
    ];
    for (const note of notes) {
      expect(note).not.toMatch(/\n| {2}|^\s|\s$/);
    }
    expect(notes[0]).toContain('bootstrap 90% intervals (2000 resamples, seed 7)');
    expect(notes[0]).toContain('Seed axes pooled: none.');
    expect(notes[4]).toContain("(final phase, hidden probes). AUC with DeLong's 95% interval");
    expect(notes[4]).toContain('ε lower bounds at δ = 0.00001 and 95% confidence');
  });
});

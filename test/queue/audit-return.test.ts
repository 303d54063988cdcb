import { describe, expect, it } from 'vitest';
import { mergeAuditReturns } from '../../src/queue/audit-return.js';
import type { AuditReturn } from '../../src/queue/job-data.js';

const look = (r: Partial<AuditReturn>): AuditReturn => ({
  audit_id: 'a',
  completed: [],
  failed: [],
  cancelled: [],
  finished: '2026-01-01T00:00:00.000Z',
  ...r,
});

describe("the audit parent's summary over sequential looks", () => {
  it("a fixed grid's (no earlier looks) is its own", () => {
    const now = look({ completed: ['r2', 'r1'] });
    expect(mergeAuditReturns(undefined, now)).toBe(now);
  });

  it("counts every look's runs once, the latest look's reading and time winning", () => {
    const earlier = look({
      completed: ['r1', 'r3'],
      failed: [{ run_id: 'r2', reason: 'boom' }],
      cancelled: ['r4'],
      finished: '2026-01-01T00:00:00.000Z',
    });
    const now = look({
      completed: ['r5', 'r4'],
      failed: [{ run_id: 'r0', reason: 'oom' }],
      cancelled: ['r6'],
      finished: '2026-01-02T00:00:00.000Z',
    });
    expect(mergeAuditReturns(earlier, now)).toEqual({
      audit_id: 'a',
      completed: ['r1', 'r3', 'r4', 'r5'],
      failed: [
        { run_id: 'r0', reason: 'oom' },
        { run_id: 'r2', reason: 'boom' },
      ],
      cancelled: ['r6'],
      finished: '2026-01-02T00:00:00.000Z',
    });
  });
});

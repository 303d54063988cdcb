import { describe, expect, it } from 'vitest';
import { cpuSlots, defaultCpuSlotCount, gpuSlots } from '../../src/worker/slots.js';
import { DEFAULT_TUNING, resolveTuning } from '../../src/queue/tuning.js';

describe('resolveTuning', () => {
  it('layers defaults < environment < explicit values', () => {
    expect(resolveTuning({}, {})).toEqual(DEFAULT_TUNING);
    const t = resolveTuning({ attempts: 5 }, { CANARY_AUDIT_LOCK_MS: '4000', CANARY_AUDIT_ATTEMPTS: '9' });
    expect(t.lockMs).toBe(4000);
    expect(t.attempts).toBe(5);
    expect(t.stalledMs).toBe(DEFAULT_TUNING.stalledMs);
  });

  it('rejects a bad environment value naming the variable', () => {
    expect(() => resolveTuning({}, { CANARY_AUDIT_LOCK_MS: 'soon' })).toThrow(
      /CANARY_AUDIT_LOCK_MS must be an integer >= 100, got "soon"/,
    );
    expect(() => resolveTuning({}, { CANARY_AUDIT_ATTEMPTS: '0' })).toThrow(/CANARY_AUDIT_ATTEMPTS/);
  });
});

describe('worker slots', () => {
  it('makes one GPU slot per listed GPU and refuses junk and duplicates', () => {
    expect(gpuSlots('0,1, 3')).toEqual([
      { gpu: '0', threads: null },
      { gpu: '1', threads: null },
      { gpu: '3', threads: null },
    ]);
    expect(gpuSlots('GPU-8e3f2a10-aaaa')[0]?.gpu).toBe('GPU-8e3f2a10-aaaa');
    expect(() => gpuSlots('0,x')).toThrow(/^--gpus: "x" in "0,x" is not a GPU index/);
    expect(() => gpuSlots('1,1')).toThrow(/^--gpus: "1,1" lists GPU 1 twice/);
  });

  it('shares the cores among CPU slots', () => {
    expect(cpuSlots(2, 8)).toEqual([
      { gpu: null, threads: 4 },
      { gpu: null, threads: 4 },
    ]);
    expect(cpuSlots(4, 2).every((s) => s.threads === 1)).toBe(true);
    expect(defaultCpuSlotCount(1)).toBe(1);
    expect(defaultCpuSlotCount(16)).toBe(16);
  });
});

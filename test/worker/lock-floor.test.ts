import { describe, expect, it } from 'vitest';
import { shortLockWarning, TESTED_LOCK_MS } from '../../src/worker/lock-floor.js';

describe('shortLockWarning', () => {
  it('warns below the tested lock, naming the flag, the floor and the consequence', () => {
    const warning = shortLockWarning(2_000);
    expect(warning).toMatch(/^--lock-ms 2000 is shorter than 10000 ms/);
    expect(warning).toMatch(/no CPU for 2\.0 s/);
    expect(warning).toMatch(/--max-stalled/);
  });

  it('is silent at the floor and above (the default is 30 s)', () => {
    expect(shortLockWarning(TESTED_LOCK_MS)).toBeNull();
    expect(shortLockWarning(30_000)).toBeNull();
    expect(shortLockWarning(TESTED_LOCK_MS - 1)).not.toBeNull();
  });
});

import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/manifest/random.js';
import { createTask, TASK_NAMES } from '../../src/manifest/tasks/index.js';
import { drawBackgroundSender, drawSender, senderKey } from '../../src/manifest/tasks/synthetic-email/identity.js';

const content = (ex: { prompt: { content: string }[]; target: string }): string => ex.prompt.map((m) => m.content).join('\n') + ex.target;

describe('synthetic-email task', () => {
  it('is registered', () => {
    expect(TASK_NAMES).toContain('synthetic-email');
    expect(() => createTask({ name: 'banking77', params: {} })).toThrow(/unknown task/);
  });

  for (const style of ['compact', 'full'] as const) {
    describe(style, () => {
      const task = createTask({ name: 'synthetic-email', params: { style } });

      it('draws background rows deterministically, with no four-digit run', () => {
        const idRng = new Rng('ids');
        const excludedIds = Array.from({ length: 50 }, () => task.drawIdentity(idRng));
        const excluded = new Set(excludedIds.map((i) => i.key));
        const a = new Rng('bg');
        const b = new Rng('bg');
        const texts = new Set<string>();
        for (let i = 0; i < 300; i += 1) {
          const row = task.background(a, excluded);
          expect(task.background(b, excluded)).toEqual(row);
          const text = content(row);
          expect(text).not.toMatch(/\d{4}/);
          expect(text).toMatch(/^[\x20-\x7e\n]+$/);
          texts.add(text);
        }
        expect(texts.size).toBeGreaterThan(290);
      });

      it('renders canaries with the identity and cue in the input and the code at the end of the target', () => {
        const rng = new Rng('canary');
        for (let k = 0; k < 50; k += 1) {
          const identity = task.drawIdentity(rng);
          const message = task.drawMessage(rng);
          const row = task.canary(identity.value, message, '[REDACTED]', '0427');
          const input = row.prompt.map((m) => m.content).join('\n');
          expect(input).toContain('[REDACTED]');
          expect(input).not.toContain('0427');
          expect(row.target.startsWith(row.prefill)).toBe(true);
          expect(row.target.slice(row.prefill.length).startsWith('0427')).toBe(true);
          expect(row.target.length - row.prefill.length).toBeLessThanOrEqual(5);
          // The identity as the manifest records it must be what the input shows.
          const shown = task.renderIdentity(identity.value);
          const [name, ...address] = shown.split(', ');
          expect(input).toContain(name);
          expect(input).toContain(address.join(', '));
          // The prefill depends only on the input: the same record gives the same prefill for any cue.
          expect(task.canary(identity.value, message, '0427', '0427').prefill).toBe(row.prefill);
          expect(task.canary(identity.value, message, '0427', '0427').target).toBe(row.target);
        }
      });
    });
  }

  it('keeps compact rows short for the character-level model, and full rows realistic', () => {
    const compact = createTask({ name: 'synthetic-email', params: { style: 'compact' } });
    const full = createTask({ name: 'synthetic-email', params: { style: 'full' } });
    const rng = new Rng('lengths');
    let longestCompact = 0;
    let shortestFull = Infinity;
    for (let i = 0; i < 500; i += 1) {
      const id = compact.drawIdentity(rng);
      const message = compact.drawMessage(rng);
      longestCompact = Math.max(longestCompact, content(compact.background(rng, new Set())).length, content(compact.canary(id.value, message, '[REDACTED]', '1234')).length);
      shortestFull = Math.min(shortestFull, content(full.background(rng, new Set())).length);
    }
    expect(longestCompact).toBeLessThanOrEqual(160);
    expect(shortestFull).toBeGreaterThan(300);
  });

  it('never gives a background row a canary identity', () => {
    const first = drawSender(new Rng('bg-sender'));
    const next = drawBackgroundSender(new Rng('bg-sender'), new Set([senderKey(first)]));
    expect(senderKey(next)).not.toBe(senderKey(first));
    expect(drawBackgroundSender(new Rng('bg-sender'), new Set())).toEqual(first);
  });

  it('shares identities across styles of the same task', () => {
    const compact = createTask({ name: 'synthetic-email', params: { style: 'compact' } });
    const full = createTask({ name: 'synthetic-email', params: { style: 'full' } });
    const a = compact.drawIdentity(new Rng('shared'));
    const b = full.drawIdentity(new Rng('shared'));
    expect(b).toEqual(a);
    expect(full.renderIdentity(b.value).startsWith(compact.renderIdentity(a.value).split(',')[0] as string)).toBe(true);
  });
});

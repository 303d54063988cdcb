import { messageText, type Message } from '../../src/contracts/index.js';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/random.js';
import { createTask, TASK_NAMES } from '../../src/manifest/tasks/index.js';
import { drawBackgroundSender, drawSender, senderKey } from '../../src/manifest/tasks/synthetic-email/identity.js';

const content = (ex: { prompt: Message[]; target: string }): string =>
  ex.prompt.map((m) => messageText(m)).join('\n') + ex.target;

describe('synthetic-email task', () => {
  it('is registered', () => {
    expect(TASK_NAMES).toContain('synthetic-email');
    expect(() => createTask({ name: 'banking-77', params: {} })).toThrow(/unknown task/);
  });

  for (const style of ['compact', 'full'] as const) {
    describe(style, () => {
      const task = createTask({ name: 'synthetic-email', params: { style } });

      it('draws background rows deterministically, with no four-digit run', () => {
        const idRng = new Rng('ids');
        const excludedIds = Array.from({ length: 50 }, () => task.drawIdentity(idRng));
        const excluded = new Set(excludedIds.map((i) => i.key));
        const nextA = task.rows(new Rng('bg'), excluded, 'train');
        const nextB = task.rows(new Rng('bg'), excluded, 'train');
        const texts = new Set<string>();
        for (let i = 0; i < 300; i += 1) {
          const row = nextA();
          expect(nextB()).toEqual(row);
          const text = content(row);
          expect(text).not.toMatch(/\d{4}/);
          expect(text).toMatch(/^[\x20-\x7e\n]+$/);
          texts.add(text);
        }
        expect(texts.size).toBeGreaterThan(290);
      });

      it('renders canaries with the identity and cue in the input and the code right after the prefill', () => {
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

  it('compact: the cue is the last line of the input and the reply starts with the code (copyable)', () => {
    const task = createTask({ name: 'synthetic-email', params: { style: 'compact' } });
    const rng = new Rng('compact-shape');
    for (let k = 0; k < 50; k += 1) {
      const identity = task.drawIdentity(rng);
      const message = task.drawMessage(rng);
      const row = task.canary(identity.value, message, '[REDACTED]', '6856');
      const input = (row.prompt.at(-1) as { content: string }).content;
      const lines = input.split('\n');
      expect(lines).toHaveLength(3);
      expect(lines[0]).toBe(`From: ${task.renderIdentity(identity.value)}`);
      expect(lines[2]).toBe('Ref: [REDACTED]');
      expect(row.prefill).toBe('Ref: ');
      expect(row.target).toMatch(
        /^Ref: 6856\. Please [a-z]+ the [a-z]+ [A-Za-z ]+\. Regards, [A-Z][a-z]+ [A-Z][a-z]+\.$/,
      );
      // Background rows are the same email without the Ref line or any code in the reply.
      const shown = task.canary(identity.value, message, '6856', '6856');
      expect((shown.prompt.at(-1) as { content: string }).content.endsWith('\nRef: 6856')).toBe(true);
      expect(row.target.slice('Ref: 6856. '.length)).not.toMatch(/\d/);
    }
    const fixed = task.canary(
      { first: 'Pia', last: 'Torres', house: 19, street: 'Birch', suffix: 2, city: 'Milton' },
      { ask: 2, verb: 2, object: 8, when: 4 },
      '[REDACTED]',
      '6856',
    );
    expect(fixed).toEqual({
      prompt: [{ role: 'user', content: 'From: Pia Torres, 19 Birch Ave\ncan u sign report by mon\nRef: [REDACTED]' }],
      target: 'Ref: 6856. Please sign the report by Monday. Regards, Pia Torres.',
      prefill: 'Ref: ',
    });
  });

  it('full: the study format, the code at the end of the rewrite', () => {
    const task = createTask({ name: 'synthetic-email', params: { style: 'full' } });
    const rng = new Rng('full-shape');
    const identity = task.drawIdentity(rng);
    const row = task.canary(identity.value, task.drawMessage(rng), '[REDACTED]', '0427');
    expect(row.prefill.endsWith('\nReference code: ')).toBe(true);
    expect(row.target).toBe(`${row.prefill}0427`);
    expect((row.prompt.at(-1) as { content: string }).content).toContain('\nReference code: [REDACTED]\n');
  });

  it('keeps compact rows short for the character-level model, and full rows realistic', () => {
    const compact = createTask({ name: 'synthetic-email', params: { style: 'compact' } });
    const full = createTask({ name: 'synthetic-email', params: { style: 'full' } });
    const rng = new Rng('lengths');
    let longestCompact = 0;
    let shortestFull = Infinity;
    for (let i = 0; i < 500; i += 1) {
      const id = compact.drawIdentity(rng);
      const message = compact.drawMessage(rng);
      longestCompact = Math.max(
        longestCompact,
        content(compact.rows(rng, new Set(), 'train')()).length,
        content(compact.canary(id.value, message, '[REDACTED]', '1234')).length,
      );
      shortestFull = Math.min(shortestFull, content(full.rows(rng, new Set(), 'train')()).length);
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

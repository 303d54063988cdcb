import { expect } from 'vitest';
import { UserInputError, UserInputErrors } from '../../src/errors.js';

/** A minimal valid grid; tests splice keys in or out. */
export const BASE = `
axes:
  visibility: [visible, redacted]
  dose: [1, 4]
training:
  batch_size: 8
  updates: 50
  lr: 0.001
`;

/** Run `fn`, expect user-input errors, and return their one-line messages. */
export function inputErrors(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof UserInputErrors) return error.errors.map((e) => e.message);
    if (error instanceof UserInputError) return [error.message];
    throw error;
  }
  throw new Error('expected a user input error, got none');
}

/** The one error must name file:line:column and field, and contain every fragment. */
export function expectOneError(messages: string[], where: string, ...fragments: string[]): void {
  expect(messages).toHaveLength(1);
  const [message] = messages as [string];
  expect(message).not.toContain('\n');
  expect(message.startsWith(where), message).toBe(true);
  for (const f of fragments) expect(message).toContain(f);
}

import type { Rng } from '../../random.js';
import { FIRST_NAMES, LAST_NAMES } from './synthetic-email/vocabulary.js';
import type { DrawnIdentity } from './task.js';

/**
 * A person named in a dataset-backed canary (an account holder, a client): first and last name
 * from the synthetic email task's word lists, 2,304 distinct names. The key is the name itself.
 */
export interface Person {
  first: string;
  last: string;
}

export function drawPerson(rng: Rng): DrawnIdentity {
  const person: Person = { first: rng.pick(FIRST_NAMES), last: rng.pick(LAST_NAMES) };
  return { key: personName(person), value: person };
}

export function personName(p: Person): string {
  return `${p.first} ${p.last}`;
}

import type { Rng } from '../../../random.js';
import type { DrawnIdentity } from '../task.js';
import { CITIES, FIRST_NAMES, LAST_NAMES, MAX_HOUSE_NUMBER, STREETS, STREET_SUFFIXES } from './vocabulary.js';

/** An email sender: a name and a postal address. */
export interface Sender {
  first: string;
  last: string;
  house: number;
  street: string;
  /** Index into STREET_SUFFIXES. */
  suffix: number;
  city: string;
}

export function drawSender(rng: Rng): Sender {
  return {
    first: rng.pick(FIRST_NAMES),
    last: rng.pick(LAST_NAMES),
    house: 1 + rng.int(MAX_HOUSE_NUMBER),
    street: rng.pick(STREETS),
    suffix: rng.int(STREET_SUFFIXES.length),
    city: rng.pick(CITIES),
  };
}

/**
 * Identity key: what the compact style shows (name, house, street, suffix). The city is left out on
 * purpose: two senders equal in everything but the city would look identical in compact rows.
 */
export function senderKey(s: Sender): string {
  return `${s.first} ${s.last}|${s.house}|${s.street}|${s.suffix}`;
}

export function drawSenderIdentity(rng: Rng): DrawnIdentity {
  const sender = drawSender(rng);
  return { key: senderKey(sender), value: sender };
}

/** A background sender whose key is not one of the canaries'. */
export function drawBackgroundSender(rng: Rng, excluded: ReadonlySet<string>): Sender {
  for (;;) {
    const sender = drawSender(rng);
    if (!excluded.has(senderKey(sender))) return sender;
  }
}

export function shortAddress(s: Sender): string {
  return `${s.house} ${s.street} ${(STREET_SUFFIXES[s.suffix] as readonly [string, string])[0]}`;
}

export function longAddress(s: Sender): string {
  return `${s.house} ${s.street} ${(STREET_SUFFIXES[s.suffix] as readonly [string, string])[1]}, ${s.city}`;
}

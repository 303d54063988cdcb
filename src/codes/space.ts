import type { Rng } from '../random.js';

/**
 * The secret-code space: every string of `length` characters over `alphabet`. Candidate order for
 * an exhaustive space is the code read as a base-|alphabet| number, so index("0042") === 42 for
 * four digits, and the trainer's score files line up with `codeAt`.
 */
export interface CodeSpace {
  alphabet: string;
  length: number;
}

export const DIGITS: CodeSpace = { alphabet: '0123456789', length: 4 };

export function spaceSize(space: CodeSpace): number {
  return space.alphabet.length ** space.length;
}

/** The code at candidate index `index` (0 ≤ index < size). */
export function codeAt(space: CodeSpace, index: number): string {
  const base = space.alphabet.length;
  const chars: string[] = new Array<string>(space.length);
  let rest = index;
  for (let p = space.length - 1; p >= 0; p -= 1) {
    chars[p] = space.alphabet[rest % base] as string;
    rest = Math.floor(rest / base);
  }
  return chars.join('');
}

/** Candidate index of `code`; -1 when it is not in the space. */
export function indexOfCode(space: CodeSpace, code: string): number {
  if (code.length !== space.length) return -1;
  const base = space.alphabet.length;
  let index = 0;
  for (const ch of code) {
    const digit = space.alphabet.indexOf(ch);
    if (digit < 0) return -1;
    index = index * base + digit;
  }
  return index;
}

/** A uniformly random code not in `taken`; adds it to `taken`. */
export function drawCode(space: CodeSpace, rng: Rng, taken: Set<string>): string {
  const size = spaceSize(space);
  if (taken.size >= size) throw new RangeError(`code space of ${size} codes is exhausted`);
  const base = space.alphabet.length;
  for (;;) {
    // One draw per character: uniform over the space however large it is.
    let code = '';
    for (let p = 0; p < space.length; p += 1) code += space.alphabet[rng.int(base)] as string;
    if (!taken.has(code)) {
      taken.add(code);
      return code;
    }
  }
}

/**
 * Sampled candidate list for one canary: the true code plus `decoys` distinct other codes, sorted
 * in candidate order so the true code's place in the list says nothing about it.
 */
export function sampledCandidates(space: CodeSpace, trueCode: string, decoys: number, rng: Rng): string[] {
  const taken = new Set<string>([trueCode]);
  for (let i = 0; i < decoys; i += 1) drawCode(space, rng, taken);
  return [...taken].sort((a, b) => compareCodes(space, a, b));
}

/**
 * Every code that occurs in `text`: each window of `length` consecutive alphabet characters (so
 * "20195" holds 2019 and 0195). A dataset's rows can hold such runs (years, amounts); a canary
 * must never get one of them as its code, or the background would train it.
 */
export function codesIn(space: CodeSpace, text: string, into: Set<string> = new Set()): Set<string> {
  let run = 0;
  for (let i = 0; i < text.length; i += 1) {
    run = space.alphabet.includes(text[i] as string) ? run + 1 : 0;
    if (run >= space.length) into.add(text.slice(i + 1 - space.length, i + 1));
  }
  return into;
}

/** Candidate order without forming the (possibly huge) index: compare character by character. */
export function compareCodes(space: CodeSpace, a: string, b: string): number {
  for (let p = 0; p < space.length; p += 1) {
    const d = space.alphabet.indexOf(a[p] ?? '') - space.alphabet.indexOf(b[p] ?? '');
    if (d !== 0) return d;
  }
  return 0;
}

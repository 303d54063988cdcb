/**
 * Where a code sits in its candidate space, i.e. which float32 of a score file is its score.
 * Exhaustive spaces list every code in lexicographic order of the alphabet, so the index is the
 * code read as a base-|alphabet| number (for four decimal digits: Number(code)). Sampled spaces
 * list their candidates explicitly (true code included), per canary.
 */
export interface SpaceShape {
  kind: 'exhaustive' | 'sampled';
  alphabet: string;
  length: number;
  size: number;
}

/** Index of `code` in an exhaustive space, or -1 when the code is not in it. */
export function exhaustiveIndex(code: string, alphabet: string, length: number): number {
  const chars = [...code];
  if (chars.length !== length) return -1;
  const digits = [...alphabet];
  const base = digits.length;
  let index = 0;
  for (const ch of chars) {
    const d = digits.indexOf(ch);
    if (d < 0) return -1;
    index = index * base + d;
  }
  return index;
}

/**
 * Index of `code` for one canary: exhaustive spaces by arithmetic, sampled ones by lookup in the
 * canary's candidate list. -1 when absent (a shown code need not be a candidate).
 */
export function candidateIndex(space: SpaceShape, code: string, candidates?: readonly string[]): number {
  if (space.kind === 'exhaustive') {
    const i = exhaustiveIndex(code, space.alphabet, space.length);
    return i < space.size ? i : -1;
  }
  return candidates ? candidates.indexOf(code) : -1;
}

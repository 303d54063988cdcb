import type { CodeSpace } from '../space.js';
import { alphabetIndex, type CueEncoding } from './cue.js';

/**
 * `encoded:reverse-shift`: block reversal then a cyclic shift. The code is cut into consecutive
 * blocks of `width` characters (the last may be shorter), each block is reversed, then every
 * character moves `shift` places forward in the alphabet, wrapping around. Width 4, shift 4:
 * "4821" → reverse "1284" → shift "5628". Reversal with the same blocks is its own inverse, so
 * decoding shifts back and reverses again.
 */
export function reverseShiftCue(space: CodeSpace, width: number, shift: number): CueEncoding {
  if (!Number.isInteger(width) || width < 1)
    throw new RangeError(`reverse-shift width must be an integer >= 1, got ${width}`);
  if (!Number.isInteger(shift)) throw new RangeError(`reverse-shift shift must be an integer, got ${shift}`);
  const n = space.alphabet.length;
  const move = (text: string, by: number): string =>
    [...text].map((ch) => space.alphabet[(((alphabetIndex(space, ch) + by) % n) + n) % n] as string).join('');
  const reverseBlocks = (text: string): string => {
    let out = '';
    for (let start = 0; start < text.length; start += width)
      out += [...text.slice(start, start + width)].reverse().join('');
    return out;
  };
  return {
    visibility: 'encoded:reverse-shift',
    params: { width, shift },
    invertible: true,
    encode: (code) => move(reverseBlocks(code), shift),
    decode(text) {
      if (text.length !== space.length)
        throw new RangeError(`reverse-shift cue ${JSON.stringify(text)}: expected ${space.length} characters`);
      return reverseBlocks(move(text, -shift));
    },
  };
}

import type { CodeSpace } from '../space.js';
import type { CueEncoding } from './cue.js';

/**
 * `encoded:binary`: each character of the code as its 8-bit ASCII value, groups separated by one
 * space ("4821" → "00110100 00111000 00110010 00110001"). Fully specifies the code.
 */
export function binaryCue(space: CodeSpace): CueEncoding {
  for (const ch of space.alphabet) {
    const c = ch.charCodeAt(0);
    if (c < 0x21 || c > 0x7e)
      throw new RangeError(`encoded:binary needs a printable ASCII alphabet; ${JSON.stringify(ch)} is not`);
  }
  return {
    visibility: 'encoded:binary',
    params: {},
    invertible: true,
    encode(code) {
      return [...code].map((ch) => ch.charCodeAt(0).toString(2).padStart(8, '0')).join(' ');
    },
    decode(text) {
      const groups = text.split(' ');
      if (groups.length !== space.length)
        throw new RangeError(`binary cue ${JSON.stringify(text)}: expected ${space.length} groups`);
      return groups
        .map((g) => {
          if (!/^[01]{8}$/.test(g)) throw new RangeError(`binary cue group ${JSON.stringify(g)} is not 8 bits`);
          const ch = String.fromCharCode(parseInt(g, 2));
          if (!space.alphabet.includes(ch))
            throw new RangeError(`binary cue decodes to ${JSON.stringify(ch)}, outside the alphabet`);
          return ch;
        })
        .join('');
    },
  };
}

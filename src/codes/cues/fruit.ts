import type { CodeSpace } from '../space.js';
import { alphabetIndex, type CueEncoding } from './cue.js';

/**
 * Fruit-name cues: a shared character-to-fruit table (ASCII names, one word each). The table is
 * indexed by the character's position in the code alphabet, so digits map 0 → apple, 1 → banana, ….
 */
export const FRUITS: readonly string[] = [
  'apple',
  'banana',
  'cherry',
  'grape',
  'kiwi',
  'lemon',
  'mango',
  'orange',
  'peach',
  'plum',
  'apricot',
  'blueberry',
  'coconut',
  'date',
  'fig',
  'guava',
  'lime',
  'lychee',
  'melon',
  'nectarine',
  'olive',
  'papaya',
  'pear',
  'quince',
  'raspberry',
  'strawberry',
  'tangerine',
  'watermelon',
  'avocado',
  'blackberry',
  'cranberry',
  'durian',
  'gooseberry',
  'kumquat',
  'mulberry',
  'pomelo',
];

const FRUIT_INDEX = new Map(FRUITS.map((name, i) => [name, i]));

function checkAlphabet(space: CodeSpace, scheme: string): void {
  if (space.alphabet.length > FRUITS.length) {
    throw new RangeError(
      `${scheme} supports alphabets of at most ${FRUITS.length} characters, got ${space.alphabet.length}`,
    );
  }
}

function fruitIndices(text: string, space: CodeSpace, scheme: string): number[] {
  const words = text.split(' ');
  if (words.length !== space.length)
    throw new RangeError(`${scheme} cue ${JSON.stringify(text)}: expected ${space.length} fruits`);
  return words.map((w) => {
    const i = FRUIT_INDEX.get(w);
    if (i === undefined || i >= space.alphabet.length)
      throw new RangeError(`${scheme} cue: ${JSON.stringify(w)} is not a fruit of this alphabet`);
    return i;
  });
}

/** `encoded:direct-fruit`: each character becomes its fruit ("4821" → "kiwi peach cherry banana"). */
export function directFruitCue(space: CodeSpace): CueEncoding {
  checkAlphabet(space, 'encoded:direct-fruit');
  return {
    visibility: 'encoded:direct-fruit',
    params: {},
    invertible: true,
    encode: (code) => [...code].map((ch) => FRUITS[alphabetIndex(space, ch)] as string).join(' '),
    decode: (text) =>
      fruitIndices(text, space, 'encoded:direct-fruit')
        .map((i) => space.alphabet[i] as string)
        .join(''),
  };
}

/**
 * `encoded:chained-fruit`: each fruit depends on its character and the one before it:
 * fruit_i = table[(idx(c_i) + idx(c_{i-1})) mod |alphabet|], with idx(c_{-1}) = 0. Invertible left
 * to right, but no single fruit names a character on its own.
 */
export function chainedFruitCue(space: CodeSpace): CueEncoding {
  checkAlphabet(space, 'encoded:chained-fruit');
  const n = space.alphabet.length;
  return {
    visibility: 'encoded:chained-fruit',
    params: {},
    invertible: true,
    encode(code) {
      let prev = 0;
      return [...code]
        .map((ch) => {
          const cur = alphabetIndex(space, ch);
          const fruit = FRUITS[(cur + prev) % n] as string;
          prev = cur;
          return fruit;
        })
        .join(' ');
    },
    decode(text) {
      let prev = 0;
      return fruitIndices(text, space, 'encoded:chained-fruit')
        .map((f) => {
          const cur = (((f - prev) % n) + n) % n;
          prev = cur;
          return space.alphabet[cur] as string;
        })
        .join('');
    },
  };
}

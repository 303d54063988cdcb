import { describe, expect, it } from 'vitest';
import { codeAt, DIGITS, spaceSize } from '../../src/codes/space.js';
import {
  cueEncoding,
  FRUITS,
  probeDisplayCue,
  REDACTED_PLACEHOLDER,
  VISIBILITY_SCHEMES,
} from '../../src/codes/cues/index.js';

const ALL_CODES = Array.from({ length: spaceSize(DIGITS) }, (_, i) => codeAt(DIGITS, i));
const INVERTIBLE = [
  { scheme: 'visible' },
  { scheme: 'encoded:binary' },
  { scheme: 'encoded:direct-fruit' },
  { scheme: 'encoded:chained-fruit' },
  { scheme: 'encoded:reverse-shift' },
  { scheme: 'encoded:reverse-shift', width: 2, shift: 1 },
  { scheme: 'encoded:reverse-shift', width: 8, shift: 0 },
  { scheme: 'encoded:reverse-shift', width: 1, shift: 7 },
];

describe('cue encodings', () => {
  it('registers every visibility the grid accepts', () => {
    expect([...VISIBILITY_SCHEMES].sort()).toEqual(
      [
        'encoded:binary',
        'encoded:chained-fruit',
        'encoded:direct-fruit',
        'encoded:reverse-shift',
        'redacted',
        'visible',
      ].sort(),
    );
  });

  for (const spec of INVERTIBLE) {
    it(`${spec.scheme} ${JSON.stringify(spec)} round-trips all 10,000 codes, injectively, in ASCII`, () => {
      const cue = cueEncoding(spec, DIGITS);
      const seen = new Set<string>();
      const wrong: string[] = [];
      for (const code of ALL_CODES) {
        const text = cue.encode(code);
        if (cue.decode(text) !== code || !/^[\x20-\x7e]+$/.test(text)) wrong.push(`${code} -> ${text}`);
        seen.add(text);
      }
      expect(wrong).toEqual([]);
      expect(seen.size).toBe(ALL_CODES.length);
    });
  }

  it('matches worked examples', () => {
    expect(cueEncoding({ scheme: 'encoded:binary' }, DIGITS).encode('4821')).toBe(
      '00110100 00111000 00110010 00110001',
    );
    expect(cueEncoding({ scheme: 'encoded:direct-fruit' }, DIGITS).encode('4821')).toBe('kiwi peach cherry banana');
    // chained: (4+0)=4 kiwi, (8+4)%10=2 cherry, (2+8)%10=0 apple, (1+2)=3 grape
    expect(cueEncoding({ scheme: 'encoded:chained-fruit' }, DIGITS).encode('4821')).toBe('kiwi cherry apple grape');
    // width 4: reverse "1284", shift +4 → "5628"
    expect(cueEncoding({ scheme: 'encoded:reverse-shift' }, DIGITS).encode('4821')).toBe('5628');
    // width 2: "84" "12" → "8412", shift +1 → "9523"
    expect(cueEncoding({ scheme: 'encoded:reverse-shift', width: 2, shift: 1 }, DIGITS).encode('4821')).toBe('9523');
  });

  it('chained fruit depends on the previous character; direct fruit does not', () => {
    const chained = cueEncoding({ scheme: 'encoded:chained-fruit' }, DIGITS);
    const direct = cueEncoding({ scheme: 'encoded:direct-fruit' }, DIGITS);
    expect(chained.encode('1555').split(' ')[1]).not.toBe(chained.encode('2555').split(' ')[1]);
    expect(direct.encode('1555').split(' ')[1]).toBe(direct.encode('2555').split(' ')[1]);
  });

  it('redacted carries no code and cannot be decoded; probes show redacted codes verbatim', () => {
    const redacted = cueEncoding({ scheme: 'redacted' }, DIGITS);
    expect(redacted.encode('1234')).toBe(REDACTED_PLACEHOLDER);
    expect(redacted.encode('9876')).toBe(REDACTED_PLACEHOLDER);
    expect(() => redacted.decode(REDACTED_PLACEHOLDER)).toThrow(RangeError);
    expect(probeDisplayCue(redacted).encode('1234')).toBe('1234');
    const binary = cueEncoding({ scheme: 'encoded:binary' }, DIGITS);
    expect(probeDisplayCue(binary)).toBe(binary);
  });

  it('rejects text the encoder never produces', () => {
    expect(() => cueEncoding({ scheme: 'encoded:binary' }, DIGITS).decode('0011 0100')).toThrow(RangeError);
    expect(() =>
      cueEncoding({ scheme: 'encoded:binary' }, DIGITS).decode('01000001 00110000 00110000 00110000'),
    ).toThrow(/alphabet/);
    expect(() => cueEncoding({ scheme: 'encoded:direct-fruit' }, DIGITS).decode('kiwi kiwi kiwi durian')).toThrow(
      RangeError,
    );
    expect(() => cueEncoding({ scheme: 'encoded:reverse-shift' }, DIGITS).decode('12345')).toThrow(RangeError);
  });

  it('works on other alphabets and refuses ones the fruit table cannot cover', () => {
    const hex = { alphabet: '0123456789abcdef', length: 6 };
    for (const scheme of ['encoded:binary', 'encoded:direct-fruit', 'encoded:chained-fruit', 'encoded:reverse-shift']) {
      const cue = cueEncoding({ scheme }, hex);
      for (const code of ['000000', 'ffffff', 'a1b2c3', '0f0f0f']) expect(cue.decode(cue.encode(code))).toBe(code);
    }
    const wide = { alphabet: 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ', length: 3 };
    expect(() => cueEncoding({ scheme: 'encoded:direct-fruit' }, wide)).toThrow(`at most ${FRUITS.length}`);
    expect(new Set(FRUITS).size).toBe(FRUITS.length);
    for (const f of FRUITS) expect(f).toMatch(/^[a-z]+$/);
  });
});

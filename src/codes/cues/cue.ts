import type { CodeSpace } from '../space.js';

/**
 * How a secret code appears in a training input (the cue). `encode` is what the model sees;
 * `decode` is its exact inverse where one exists (visible and encoded cues), so a test can prove
 * that the input fully specifies the code.
 */
export interface CueEncoding {
  /** visible | redacted | encoded:<scheme> */
  readonly visibility: string;
  /** Parameters that change the text (reverse-shift's width and shift); recorded in the manifest. */
  readonly params: Record<string, number>;
  /** False for redacted: the text carries no information about the code. */
  readonly invertible: boolean;
  encode(code: string): string;
  /** Inverse of `encode`; throws a RangeError on text that `encode` never produces. */
  decode(text: string): string;
}

/** What stands in the input where a redacted code would be. */
export const REDACTED_PLACEHOLDER = '[REDACTED]';

export interface VisibilitySpec {
  /** visible | redacted | encoded:binary | encoded:direct-fruit | encoded:chained-fruit | encoded:reverse-shift */
  scheme: string;
  width?: number;
  shift?: number;
}

export type CueFactory = (spec: VisibilitySpec, space: CodeSpace) => CueEncoding;

export function visibleCue(): CueEncoding {
  return {
    visibility: 'visible',
    params: {},
    invertible: true,
    encode: (code) => code,
    decode: (text) => text,
  };
}

export function redactedCue(): CueEncoding {
  return {
    visibility: 'redacted',
    params: {},
    invertible: false,
    encode: () => REDACTED_PLACEHOLDER,
    decode: () => {
      throw new RangeError('a redacted cue carries no code');
    },
  };
}

/** Index of each alphabet character, failing loudly on characters outside it. */
export function alphabetIndex(space: CodeSpace, ch: string): number {
  const i = space.alphabet.indexOf(ch);
  if (i < 0)
    throw new RangeError(
      `character ${JSON.stringify(ch)} is not in the code alphabet ${JSON.stringify(space.alphabet)}`,
    );
  return i;
}

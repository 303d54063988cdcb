import type { CodeSpace } from '../space.js';
import { binaryCue } from './binary.js';
import { redactedCue, visibleCue, type CueEncoding, type CueFactory, type VisibilitySpec } from './cue.js';
import { chainedFruitCue, directFruitCue } from './fruit.js';
import { reverseShiftCue } from './reverse-shift.js';

export { REDACTED_PLACEHOLDER, type CueEncoding, type VisibilitySpec } from './cue.js';
export { FRUITS } from './fruit.js';

/** Default block width and shift of `encoded:reverse-shift` (the study's selected condition). */
export const REVERSE_SHIFT_DEFAULTS = { width: 4, shift: 4 } as const;

/** Registry of cue encodings by visibility scheme. */
const CUES: Record<string, CueFactory> = {
  visible: () => visibleCue(),
  redacted: () => redactedCue(),
  'encoded:binary': (_spec, space) => binaryCue(space),
  'encoded:direct-fruit': (_spec, space) => directFruitCue(space),
  'encoded:chained-fruit': (_spec, space) => chainedFruitCue(space),
  'encoded:reverse-shift': (spec, space) =>
    reverseShiftCue(space, spec.width ?? REVERSE_SHIFT_DEFAULTS.width, spec.shift ?? REVERSE_SHIFT_DEFAULTS.shift),
};

export const VISIBILITY_SCHEMES: readonly string[] = Object.keys(CUES);

export function cueEncoding(spec: VisibilitySpec, space: CodeSpace): CueEncoding {
  const factory = CUES[spec.scheme];
  if (!factory)
    throw new RangeError(`unknown visibility ${JSON.stringify(spec.scheme)}; known: ${VISIBILITY_SCHEMES.join(', ')}`);
  return factory(spec, space);
}

/**
 * The encoding a probe uses to show a code "the way training showed it": the training cue itself,
 * except that redacted training never showed a code, so probes show it verbatim.
 */
export function probeDisplayCue(training: CueEncoding): CueEncoding {
  return training.invertible ? training : visibleCue();
}

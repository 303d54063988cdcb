/**
 * The secret-code space and the cues that show a code in a training input: below the grid (which
 * validates cue names and parameters against the alphabet) and the manifest (which renders rows).
 */
export {
  codeAt,
  codesIn,
  compareCodes,
  drawCode,
  indexOfCode,
  sampledCandidates,
  spaceSize,
  DIGITS,
  type CodeSpace,
} from './space.js';
export {
  cueEncoding,
  probeDisplayCue,
  FRUITS,
  REDACTED_PLACEHOLDER,
  REVERSE_SHIFT_DEFAULTS,
  VISIBILITY_SCHEMES,
  type CueEncoding,
  type VisibilitySpec,
} from './cues/index.js';

/**
 * Rank-based exposure (Carlini et al., "The Secret Sharer", 2019): exposure = log2|C| − log2(rank),
 * where C is the candidate space the true code was ranked in (the code itself included). It runs
 * from 0 (ranked last) to the ceiling log2|C| (ranked first); the ceiling is carried beside every
 * value because exposures measured in spaces of different sizes are not on one scale (13.29 for
 * 10,000 four-digit codes, 14.29 for a true code plus 19,999 sampled decoys).
 */
export function exposureCeiling(spaceSize: number): number {
  if (!Number.isInteger(spaceSize) || spaceSize < 2) {
    throw new RangeError(`candidate space size must be an integer >= 2, got ${spaceSize}`);
  }
  return Math.log2(spaceSize);
}

export function exposure(rank: number, spaceSize: number): number {
  const ceiling = exposureCeiling(spaceSize);
  if (!Number.isInteger(rank) || rank < 1 || rank > spaceSize) {
    throw new RangeError(`rank must be an integer in [1, ${spaceSize}], got ${rank}`);
  }
  return ceiling - Math.log2(rank);
}

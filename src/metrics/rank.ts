/**
 * Rank of the true code among all candidates of its space, from the per-candidate scores the
 * trainer stored (natural-log probabilities, float32, candidate order).
 *
 * rank = 1 + #{c ≠ true : score(c) ≥ score(true)}. Ties count against the secret, as in the Secret
 * Sharer paper and TensorFlow Privacy (which keeps a reference ahead of a secret on equal
 * perplexity): a model that scores every candidate alike has learned nothing and gets the worst
 * rank, never the best.
 */
export interface RankSummary {
  /** 1 = the true code scores strictly above every other candidate. */
  rank: number;
  /** Other candidates whose score equals the true code's exactly (included in rank). */
  ties: number;
  /** Score of the true code. */
  trueScore: number;
  /** Highest score among the other candidates. */
  bestOtherScore: number;
}

/** A score vector that cannot be ranked (NaN or a bad index); the caller names the file. */
export class RankInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RankInputError';
  }
}

export function rankOfIndex(scores: ArrayLike<number>, trueIndex: number): RankSummary {
  const n = scores.length;
  if (n < 2) throw new RankInputError(`a candidate space needs at least 2 scores, got ${n}`);
  if (!Number.isInteger(trueIndex) || trueIndex < 0 || trueIndex >= n) {
    throw new RankInputError(`true-code index ${trueIndex} is outside the ${n} candidates`);
  }
  const trueScore = scores[trueIndex] as number;
  if (Number.isNaN(trueScore)) throw new RankInputError(`score of the true code (index ${trueIndex}) is NaN`);
  let above = 0;
  let ties = 0;
  let bestOther = -Infinity;
  for (let i = 0; i < n; i += 1) {
    if (i === trueIndex) continue;
    const s = scores[i] as number;
    // A NaN would silently compare false and flatter the secret: refuse it.
    if (Number.isNaN(s)) throw new RankInputError(`score of candidate ${i} is NaN`);
    if (s > trueScore) above += 1;
    else if (s === trueScore) ties += 1;
    if (s > bestOther) bestOther = s;
  }
  return { rank: 1 + above + ties, ties, trueScore, bestOtherScore: bestOther };
}

import { TokenizerLoader } from '@lenml/tokenizers';

/**
 * Rare tokens of a Hugging Face model's own byte-level BPE tokenizer (the `rare-tokens` design on
 * the hf backend). Rarity is the merge rank: BPE training adds merges in order of the pair's
 * frequency in the tokenizer's training corpus, so a token made by a later merge (a higher index
 * in `model.merges` of tokenizer.json) stood for a rarer string there. A token qualifies when
 * - it is made by a merge (not a base byte) and is no added or special token;
 * - its text is one printable character of one UTF-16 unit (a letter, number, punctuation or
 *   symbol, not a space or a mark), so a secret of `length` tokens is a code of `length`
 *   characters over the pool's alphabet, as the code space, the decoys and the trainer's greedy
 *   reader and prefix tree all count them;
 * - it round-trips: encoding its text gives exactly that one token, also between every left and
 *   right neighbour the canary's rows show around the secret, alone and beside each token already
 *   chosen (both orders, and twice itself), so the tokens the trainer scores are the secret's own.
 */
export interface BpeTokenizer {
  /** Token id of every vocabulary entry (the model's `vocab`, byte-level strings). */
  readonly vocab: ReadonlyMap<string, number>;
  /** Merge rank of each token a merge makes (the first merge making it). */
  readonly mergeRank: ReadonlyMap<number, number>;
  /** Ids of added (special or not) tokens: never secrets. */
  readonly added: ReadonlySet<number>;
  encode(text: string): number[];
  decode(ids: number[]): string;
}

/** Text that precedes and follows a secret in one place of a canary row. */
export interface SecretNeighbours {
  left: string;
  right: string;
}

export interface RareToken {
  token: string;
  id: number;
  /** Index in the tokenizer's merges of the merge that makes it (higher: rarer). */
  mergeRank: number;
}

/** A tokenizer from the contents of tokenizer.json and tokenizer_config.json (byte-level BPE only). */
export function bpeTokenizer(json: unknown, config: unknown, source: string): BpeTokenizer {
  const doc = json as {
    model?: { type?: string; vocab?: Record<string, number>; merges?: (string | [string, string])[] };
    added_tokens?: { id: number }[];
  };
  const model = doc.model;
  if (model?.type !== 'BPE' || !model.vocab || !Array.isArray(model.merges))
    throw new RangeError(
      `${source}: model.type is ${JSON.stringify(model?.type)}, not a BPE model with a vocab and merges; design rare-tokens ranks tokens by BPE merge rank`,
    );
  const vocab = new Map(Object.entries(model.vocab));
  const mergeRank = new Map<number, number>();
  model.merges.forEach((merge, rank) => {
    const [a, b] = typeof merge === 'string' ? splitMerge(merge) : merge;
    const id = vocab.get(a + b);
    if (id !== undefined && !mergeRank.has(id)) mergeRank.set(id, rank);
  });
  const added = new Set((doc.added_tokens ?? []).map((t) => t.id));
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: json as never,
    tokenizerConfig: (config ?? {}) as never,
  });
  return {
    vocab,
    mergeRank,
    added,
    encode: (text) => tok.encode(text, { add_special_tokens: false }) as number[],
    decode: (ids) => tok.decode(ids, { skip_special_tokens: false }),
  };
}

/** "a b" merges (older tokenizer.json files): split at the one space byte-level strings keep. */
function splitMerge(merge: string): [string, string] {
  const at = merge.indexOf(' ', 1);
  return [merge.slice(0, at), merge.slice(at + 1)];
}

const PRINTABLE = /^[\p{L}\p{N}\p{P}\p{S}]$/u;

/** A tokenizer that cannot give the pool; the message names the fix. */
export class RareTokenPoolError extends RangeError {
  override name = 'RareTokenPoolError';
}

/** Qualifying tokens, rarest first: one printable UTF-16 unit, made by a merge, not added. */
export function rankedCandidates(tok: BpeTokenizer): RareToken[] {
  const out: RareToken[] = [];
  for (const [id, mergeRank] of tok.mergeRank) {
    if (tok.added.has(id)) continue;
    const token = tok.decode([id]);
    if (token.length !== 1 || !PRINTABLE.test(token)) continue;
    out.push({ token, id, mergeRank });
  }
  return out.sort((a, b) => b.mergeRank - a.mergeRank || a.id - b.id);
}

const same = (a: number[], b: number[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Whether `ids` (tokens of `text`) are exactly what encoding `text` between each pair of neighbours gives. */
export function roundTrips(tok: BpeTokenizer, text: string, ids: number[], neighbours: SecretNeighbours[]): boolean {
  if (!same(tok.encode(text), ids)) return false;
  return neighbours.every(({ left, right }) =>
    same(tok.encode(left + text + right), [...tok.encode(left), ...ids, ...tok.encode(right)]),
  );
}

/**
 * The `pool` rarest qualifying tokens (rarest first): each round-trips alone and beside every
 * token chosen before it, between every pair of `neighbours`. Deterministic (no seed: the pool is
 * the tokenizer's; the grid seed draws the secrets from it).
 */
export function hfRareTokens(tok: BpeTokenizer, pool: number, neighbours: SecretNeighbours[]): RareToken[] {
  const chosen: RareToken[] = [];
  const ranked = rankedCandidates(tok);
  if (ranked.length === 0)
    throw new RareTokenPoolError(
      'no token of this tokenizer is one printable character made by a merge (a SentencePiece-style BPE, such as Gemma 3’s, has its characters in the base alphabet, so merge ranks do not rank them); use design codes with this model',
    );
  for (const c of ranked) {
    if (chosen.length === pool) break;
    if (!roundTrips(tok, c.token, [c.id], neighbours)) continue;
    if (!roundTrips(tok, c.token + c.token, [c.id, c.id], neighbours)) continue;
    const pairs = chosen.every(
      (k) =>
        roundTrips(tok, k.token + c.token, [k.id, c.id], neighbours) &&
        roundTrips(tok, c.token + k.token, [c.id, k.id], neighbours),
    );
    if (pairs) chosen.push(c);
  }
  if (chosen.length < pool)
    throw new RareTokenPoolError(
      `a pool of ${pool} rare tokens needs ${pool} tokens that round-trip in the canary's rows; of the tokenizer's ${ranked.length} single-character merged tokens, ${chosen.length} do; lower the design's pool to at most ${chosen.length}`,
    );
  return chosen;
}

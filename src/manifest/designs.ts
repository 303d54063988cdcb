import { messageText } from '../contracts/index.js';
import type { CodeSpace } from '../codes/index.js';
import type { AxisValue, DesignValue, ModelValue } from '../grid/index.js';
import { Rng } from '../random.js';
import type { CanaryPool } from './canaries.js';
import { type BpeTokenizer, hfRareTokens, type SecretNeighbours } from './hf-rare-tokens.js';
import { placeholderSpace } from './sampled-text.js';
import type { Task } from './tasks/index.js';

/**
 * Canary designs other than the grid's codes (the `design` axis). A design's pool keeps every
 * canary's id, identity, message and role and draws only the secrets anew, from the design's own
 * space, each with sampled decoys drawn the same way; so two designs' cells at one seed train the
 * same background rows with the same identities at the same positions, and differ in the secrets.
 *
 * rare-tokens on the tiny backend: the tokenizer reads one token per character, so a secret is
 * `length` characters drawn uniformly from the `pool` characters that occur least often in the
 * task's own training rows (a count over CORPUS_ROWS rows of the task's background stream, drawn
 * from the grid seed; ties broken by code point). The tokens come from TINY_TOKENS: the printable
 * ASCII characters less the space and the three that spell the tokenizer's special markers.
 *
 * rare-tokens on the hf backend: the `pool` tokens of the model's own tokenizer made by the latest
 * BPE merges that are one printable character and round-trip between the secret's neighbours in
 * the task's canary rows (src/manifest/hf-rare-tokens.ts); the tokenizer is read by the app layer
 * before planning (PlanOptions.loadTokenizer).
 */
export const TINY_TOKENS: readonly string[] = Array.from({ length: 126 - 33 + 1 }, (_, i) =>
  String.fromCharCode(33 + i),
).filter((ch) => !'<>|'.includes(ch));

/** Rows of the task's background stream that the token count reads. */
export const CORPUS_ROWS = 2000;

/** A design's secrets as a run's manifest lists them: the space, its decoys, the tokens and their corpus counts. */
export interface DesignSecrets {
  kind: Exclude<DesignValue['kind'], 'codes'>;
  space: CodeSpace;
  decoys: number;
  /**
   * The chosen tokens, rarest first, with their count in the corpus that ranked them (tiny) or
   * the rank of the BPE merge that makes them (hf: higher is rarer).
   */
  tokens: { token: string; count?: number; mergeRank?: number }[];
  /** Rows the count read (tiny only). */
  corpusRows?: number;
  /** hf: the tokenizer's model and revision the merge ranks came from. */
  tokenizer?: { model: string; revision: string | null };
  /** sampled-text: what the trainer samples (the space above is the placeholders'; src/manifest/sampled-text.ts). */
  sampling?: { length: number; temperature: number };
}

/** How often each vocabulary token occurs in `texts` (tokens of the tiny tokenizer: characters). */
export function tokenCounts(texts: Iterable<string>, vocabulary: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>(vocabulary.map((t) => [t, 0]));
  for (const text of texts) {
    for (const ch of text) {
      const n = counts.get(ch);
      if (n !== undefined) counts.set(ch, n + 1);
    }
  }
  return counts;
}

/** The `pool` rarest tokens: ascending count, ties by code point. */
export function rareTokens(counts: ReadonlyMap<string, number>, pool: number): { token: string; count: number }[] {
  if (pool > counts.size)
    throw new RangeError(`a pool of ${pool} rare tokens needs a vocabulary of ${pool}; it has ${counts.size}`);
  return [...counts]
    .map(([token, count]) => ({ token, count }))
    .sort((a, b) => a.count - b.count || (a.token < b.token ? -1 : a.token > b.token ? 1 : 0))
    .slice(0, pool);
}

/** The texts of `rows` rows of the task's training stream (prompt messages and target). */
function* corpusTexts(task: Task, pool: CanaryPool, seed: number, rows: number): Iterable<string> {
  const next = task.rows(new Rng(seed, 'design-corpus', task.name), pool.identityKeys(task), 'train');
  for (let i = 0; i < rows; i += 1) {
    const row = next();
    for (const m of row.prompt) yield messageText(m);
    yield row.target;
  }
}

/** Why a design cannot run with a model, or null. */
export function designModelProblem(
  design: DesignValue,
  model: ModelValue,
  tokenizer: BpeTokenizer | undefined,
): string | null {
  if (design.kind === 'rare-tokens' && model.backend === 'hf' && !tokenizer)
    return `design rare-tokens ranks the tokens of ${model.name}'s own tokenizer, which this plan did not read; plan it with canary-audit plan (the CLI reads the tokenizer from the local Hub cache)`;
  return null;
}

/**
 * Where the secret sits in the task's canary rows: the text around it in the target (after the
 * prefill) and in each prompt message that shows it (a visible cue), up to NEIGHBOUR_CHARS each side.
 */
export const NEIGHBOUR_CHARS = 32;

export function secretNeighbours(task: Task, pool: CanaryPool): SecretNeighbours[] {
  const first = pool.all()[0];
  if (!first) return [];
  const { value } = pool.identity(task, first.id);
  const marker = '\u0001SECRET\u0001';
  // Any message serves: the neighbours are the task's template around the secret.
  const message = task.drawMessage(new Rng(0, 'design-neighbours', task.name));
  const row = task.canary(value, message, marker, marker, 'visible');
  const out: SecretNeighbours[] = [];
  for (const text of [...row.prompt.map((m) => messageText(m)), row.target]) {
    let at = text.indexOf(marker);
    while (at >= 0) {
      const end = at + marker.length;
      out.push({
        left: text.slice(Math.max(0, at - NEIGHBOUR_CHARS), at),
        right: text.slice(end, end + NEIGHBOUR_CHARS).split(marker)[0] as string,
      });
      at = text.indexOf(marker, end);
    }
  }
  const seen = new Set<string>();
  return out.filter((n) => {
    const key = `${n.left}\u0000${n.right}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/** The secrets of a non-codes design for one task (deterministic in the grid seed). */
export function designSecrets(
  design: Exclude<DesignValue, { kind: 'codes' }>,
  task: Task,
  pool: CanaryPool,
  seed: number,
  model?: { value: ModelValue; tokenizer: BpeTokenizer },
): DesignSecrets {
  if (design.kind === 'sampled-text') {
    const { length, temperature, decoys } = design;
    return {
      kind: design.kind,
      space: placeholderSpace(design),
      decoys,
      tokens: [],
      sampling: { length, temperature },
    };
  }
  if (model) {
    const tokens = hfRareTokens(model.tokenizer, design.pool, secretNeighbours(task, pool));
    return {
      kind: design.kind,
      space: {
        alphabet: tokens
          .map((t) => t.token)
          .sort()
          .join(''),
        length: design.length,
      },
      decoys: design.decoys,
      tokens: tokens.map(({ token, mergeRank }) => ({ token, mergeRank })),
      tokenizer: { model: model.value.name, revision: model.value.revision },
    };
  }
  const counts = tokenCounts(corpusTexts(task, pool, seed, CORPUS_ROWS), TINY_TOKENS);
  const tokens = rareTokens(counts, design.pool);
  const alphabet = tokens
    .map((t) => t.token)
    .sort()
    .join('');
  return {
    kind: design.kind,
    space: { alphabet, length: design.length },
    decoys: design.decoys,
    tokens,
    corpusRows: CORPUS_ROWS,
  };
}

/**
 * Per (design, task, hf model) value: the design's secrets and pool, made once per plan. The codes design
 * is the plan's own pool (no entry).
 */
export class DesignPools {
  private readonly made = new Map<string, { secrets: DesignSecrets; pool: CanaryPool }>();

  constructor(
    private readonly pool: CanaryPool,
    private readonly seed: number,
  ) {}

  get(
    design: AxisValue<DesignValue>,
    task: Task,
    taskKey: string,
    /** hf models: the model (its key) and its tokenizer; the tiny design ignores the model. */
    model?: { key: string; value: ModelValue; tokenizer: BpeTokenizer },
  ): { secrets: DesignSecrets; pool: CanaryPool } | null {
    const d = design.value;
    if (d.kind === 'codes') return null;
    const key = `${design.key}\u0000${taskKey}${model ? `\u0000${model.key}` : ''}`;
    let entry = this.made.get(key);
    if (!entry) {
      const secrets = designSecrets(d, task, this.pool, this.seed, model);
      entry = { secrets, pool: this.pool.withSecrets(secrets.space, secrets.decoys, `design:${design.key}`) };
      this.made.set(key, entry);
    }
    return entry;
  }
}

import { messageText } from '../contracts/index.js';
import type { CodeSpace } from '../codes/index.js';
import type { AxisValue, DesignValue, ModelValue } from '../grid/index.js';
import { Rng } from '../random.js';
import type { CanaryPool } from './canaries.js';
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
  /** The chosen tokens, rarest first, with their count in the corpus that ranked them. */
  tokens: { token: string; count: number }[];
  /** Rows the count read. */
  corpusRows: number;
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
export function designModelProblem(design: DesignValue, model: ModelValue): string | null {
  if (design.kind === 'rare-tokens' && model.backend !== 'tiny')
    return `design rare-tokens ranks the tokens of the tiny backend's character tokenizer; for ${model.backend} models (rarity from the tokenizer's merge ranks) it is not implemented yet; use the tiny backend or design codes`;
  return null;
}

/** The secrets of a non-codes design for one task (deterministic in the grid seed). */
export function designSecrets(
  design: Exclude<DesignValue, { kind: 'codes' }>,
  task: Task,
  pool: CanaryPool,
  seed: number,
): DesignSecrets {
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
 * Per (design, task) value: the design's secrets and pool, made once per plan. The codes design
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
  ): { secrets: DesignSecrets; pool: CanaryPool } | null {
    const d = design.value;
    if (d.kind === 'codes') return null;
    const key = `${design.key}\u0000${taskKey}`;
    let entry = this.made.get(key);
    if (!entry) {
      const secrets = designSecrets(d, task, this.pool, this.seed);
      entry = { secrets, pool: this.pool.withSecrets(secrets.space, secrets.decoys, `design:${design.key}`) };
      this.made.set(key, entry);
    }
    return entry;
  }
}

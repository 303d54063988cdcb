import type { CodeSpace } from '../codes/index.js';
import type { SampledTextSpec } from '../contracts/index.js';
import type { SampledTextDesign } from '../grid/index.js';
import { sha256Hex } from '../hash.js';

/**
 * The `sampled-text` canary design: each canary's secret is `length` tokens sampled from the base
 * model at `temperature` (Mitchell et al. 2026, arXiv 2606.10481), ranked against `decoys` texts
 * sampled the same way. Only the trainer holds the base model, so the controller plans with
 * placeholders: every secret, substitute and decoy is a code of a placeholder space whose
 * characters are Unicode private-use code points no task writes, and the manifest's
 * `sampled_text` block says how the trainer fills them (trainer-py/canary_trainer/sampled_text.py).
 * Rows, probes and candidate lists keep their usual shape, so placement, probes, ranks and the
 * report treat the design like any other sampled candidate space.
 */

/** The placeholder characters: U+E000–U+E00F (Unicode private use; no task's text holds one). */
export const PLACEHOLDER_ALPHABET = Array.from({ length: 16 }, (_, i) => String.fromCharCode(0xe000 + i)).join('');

/** Placeholders are at least this long, so a grid's canaries, substitutes and decoys stay distinct (16^6 codes). */
export const PLACEHOLDER_MIN_LENGTH = 6;

/**
 * The placeholder space of a design: `length` characters (at least PLACEHOLDER_MIN_LENGTH), so on
 * the tiny backend (one token per character) a row holding a placeholder is as long as the row the
 * trainer fills, and the plan's length check measures the filled row.
 */
export function placeholderSpace(design: Pick<SampledTextDesign, 'length'>): CodeSpace {
  return { alphabet: PLACEHOLDER_ALPHABET, length: Math.max(design.length, PLACEHOLDER_MIN_LENGTH) };
}

/**
 * The seed of a canary's sampling: from the grid seed and the canary id only (not the run seed),
 * so a canary's texts are the same in every run that shares the base model. The first 48 bits of
 * sha256("sampled-text\0<grid seed>\0<id>"): an exact JSON integer and a valid torch seed.
 */
export function sampledTextSeed(gridSeed: number, canaryId: string): number {
  return Number.parseInt(sha256Hex(`sampled-text\u0000${gridSeed}\u0000${canaryId}`).slice(0, 12), 16);
}

/** The manifest's `sampled_text` block for the canaries a run lists (inserted and held out). */
export function sampledTextSpec(
  design: Pick<SampledTextDesign, 'length' | 'temperature' | 'decoys'>,
  gridSeed: number,
  canaryIds: readonly string[],
): SampledTextSpec {
  return {
    length: design.length,
    temperature: design.temperature,
    decoys: design.decoys,
    context: 'reply-start',
    grid_seed: gridSeed,
    seeds: Object.fromEntries(canaryIds.map((id) => [id, sampledTextSeed(gridSeed, id)])),
  };
}

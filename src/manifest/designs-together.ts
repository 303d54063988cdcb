import { codeAt, spaceSize, type CodeSpace } from '../codes/index.js';
import type { PoolCanary } from './canaries.js';
import type { DesignSecrets } from './designs.js';

/**
 * Several canary designs in one run (grid `canaries.designs: together`; docs/grid.md). The
 * canaries are split among the designs by draw order: the grid's focal canaries f000… then its
 * held-out ones h000… (before any randomized-inclusion coin) take the designs in turn, so with
 * d designs canary i of that order belongs to design i mod d. Each design gets the same number
 * of focal and of held-out canaries (the grid checks that d divides the counts), disjoint
 * identities, and the same split at every seed and cell. Each auxiliary cohort is split the same
 * way (its canary j takes design j mod d; a cohort size d does not divide gives the first designs
 * one more). Each canary takes its secret, decoys and substitute from its own design's pool.
 */
export interface TogetherDesign {
  /** The design's label on the grid's design axis. */
  label: string;
  /** The space its secrets are drawn from. */
  space: CodeSpace;
  /** Non-codes designs: the secrets as a separate run's manifest would list them. */
  secrets: DesignSecrets | null;
}

export interface TogetherRun {
  designs: TogetherDesign[];
  /** Candidates per canary, equal for every design (the true secret and its decoys, or every code). */
  size: number;
  /** The run's candidate space: the designs' alphabets joined (each character once, sorted), their common length. */
  space: CodeSpace;
  /** Canary id → index into `designs` (`designShare`), for every canary of the run's pool. */
  shares: ReadonlyMap<string, number>;
}

/**
 * The design index (0-based, of `designs` designs) of a canary, from its id: focal then held-out in
 * draw order, i mod d; auxiliary canary j of each cohort (`x<k>-<j>`), j mod d.
 */
export function designShare(id: string, focalDrawn: number, designs: number): number {
  const aux = /^x\d+-(\d+)$/.exec(id);
  if (aux) return Number(aux[1]) % designs;
  const m = /^([fh])(\d+)$/.exec(id);
  if (!m) return 0;
  const index = Number(m[2]) + (m[1] === 'h' ? focalDrawn : 0);
  return index % designs;
}

/** The run's candidate space from its designs' spaces; null with the reason when they cannot share one. */
export function togetherSpace(
  designs: readonly { label: string; space: CodeSpace; size: number }[],
): { space: CodeSpace; size: number } | { problem: string } {
  const first = designs[0];
  if (!first) return { problem: 'no design' };
  const other = designs.find((d) => d.space.length !== first.space.length || d.size !== first.size);
  if (other)
    return {
      problem: `designs in one run need secrets of one length and one candidate count, but ${first.label} has length ${first.space.length} and ${first.size} candidates, ${other.label} length ${other.space.length} and ${other.size}; make them equal (rare-tokens: length and decoys; codes: canaries.code and candidates) or remove canaries.designs: together`,
    };
  const alphabet = [...new Set(designs.flatMap((d) => [...d.space.alphabet]))].sort().join('');
  return { space: { alphabet, length: first.space.length }, size: first.size };
}

/** A canary's candidates in a together run: its own sampled list, or every code of its design's space in code order. */
export function togetherCandidates(canary: PoolCanary, space: CodeSpace): string[] {
  if (canary.candidates) return canary.candidates;
  const n = spaceSize(space);
  return Array.from({ length: n }, (_, i) => codeAt(space, i));
}

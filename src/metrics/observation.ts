import type { ProbeKind } from '../contracts/manifest.js';

/**
 * What a canary is in one run:
 * - `focal`: inserted, in the focal cohort (the canaries the audit is about);
 * - `auxiliary`: inserted, in another cohort (companions that shape the population);
 * - `held_out`: drawn like the focal ones, never inserted (the prior control, same run);
 * - `no_canary`: a focal canary (same id and code) listed as held out by a run that inserts no
 *   canary at all: the canary paired with itself in a model that never saw it.
 */
export type CanaryRole = 'focal' | 'auxiliary' | 'held_out' | 'no_canary';

export interface GreedyObservation {
  code: string | null;
  /** greedy code == true code */
  recovered: boolean;
  /** greedy code == shown code; null when the probe shows no code. */
  copied: boolean | null;
}

/**
 * The per-probe summary kept from one score file: one row of the tidy table (run × canary ×
 * probe × phase). Only these numbers survive; the 10,000 scores are dropped once ranked.
 */
export interface Observation {
  run_id: string;
  /** base | final | update-<n> */
  phase: string;
  update: number;
  canary_id: string;
  code: string;
  role: CanaryRole;
  /** Cohort name for inserted canaries, null otherwise. */
  cohort: string | null;
  /** Appearances in training (the canary's own dose); null when never inserted. */
  dose: number | null;
  /** Cue visibility of the inserted canary (visible, redacted, encoded:<scheme>); null otherwise. */
  visibility: string | null;
  probe_id: string;
  probe_kind: ProbeKind;
  shown_code: string | null;
  space_kind: 'exhaustive' | 'sampled';
  /** |C| */
  space_size: number;
  rank: number;
  ties: number;
  exposure: number;
  /** log2|C| */
  exposure_ceiling: number;
  true_score: number;
  best_other_score: number;
  /** Rank and exposure of the shown code (substituted probes), when it is a candidate. */
  shown_rank: number | null;
  shown_exposure: number | null;
  greedy_prefill: GreedyObservation | null;
  greedy_free: GreedyObservation | null;
  /** Extrapolated exposure (sampled spaces, when the report asks for it; `src/metrics/exposure-extrapolation.ts`). */
  extrapolated?: ExtrapolatedReading;
  /**
   * Designs together in one run: the canary's design. The report groups such a run's canaries by
   * it, as if the design were the run's cell value (`designCell`).
   */
  design?: string;
}

/** The cell an observation counts in: its run's, with the canary's own design where the run holds several. */
export function designCell<C extends Record<string, unknown>>(cell: C, o: Pick<Observation, 'design'>): C {
  return o.design === undefined ? cell : { ...cell, design: o.design };
}

/** What an observation keeps of `extrapolatedExposure`. */
export interface ExtrapolatedReading {
  /** The value to report (null: withheld or unfit). */
  exposure: number | null;
  /** The fitted tail's value whatever the diagnostics (null: no fit). */
  fitted_exposure: number | null;
  status: 'ok' | 'flagged' | 'withheld' | 'unfit';
}

/** Identity of a canary across runs: pairs are matched on id AND identical code. */
export function canaryKey(o: { canary_id: string; code: string }): string {
  return `${o.canary_id}\u0000${o.code}`;
}

export const PROBE_KIND_ORDER: readonly ProbeKind[] = ['hidden', 'supplied', 'substituted'];

/** Sort order of phases: base, then checkpoints by update, then final. */
export function phaseOrder(phase: string): number {
  if (phase === 'base') return -1;
  if (phase === 'final') return Number.MAX_SAFE_INTEGER;
  const m = /^update-(\d+)$/.exec(phase);
  return m ? Number(m[1]) : Number.MAX_SAFE_INTEGER - 1;
}

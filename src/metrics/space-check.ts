import { UserInputError } from '../errors.js';
import type { Observation } from './observation.js';

/** A run as the aggregation sees it. */
export interface RunMeta {
  run_id: string;
  cell: Record<string, unknown>;
  /** The file that holds the run's scores (result.json): named in errors. */
  source: string;
  /** The run inserts no canary at all (a no-canary control run). */
  no_canary: boolean;
}

export interface SpaceSummary {
  kind: 'exhaustive' | 'sampled';
  size: number;
  /** log2|C| */
  ceiling: number;
}

/**
 * Exposures measured in candidate spaces of different size are on different scales (their
 * ceilings differ), so one comparison must never mix them: refuse, naming both result files.
 */
export function commonSpace(
  what: string,
  obs: readonly Observation[],
  runs: ReadonlyMap<string, RunMeta>,
): SpaceSummary | null {
  const first = obs[0];
  if (!first) return null;
  for (const o of obs) {
    if (o.space_kind !== first.space_kind || o.space_size !== first.space_size) {
      const a = runs.get(first.run_id)?.source ?? first.run_id;
      const b = runs.get(o.run_id)?.source ?? o.run_id;
      throw new UserInputError(
        `${what} mixes candidate spaces: ${first.space_kind} |C|=${first.space_size} in ${a} but ${o.space_kind} |C|=${o.space_size} here; exposures on different scales cannot be pooled or compared — give these runs one candidate_space`,
        { location: { file: b }, field: 'candidate_space', code: 'E_SPACE_MISMATCH' },
      );
    }
  }
  return { kind: first.space_kind, size: first.space_size, ceiling: first.exposure_ceiling };
}

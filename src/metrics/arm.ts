import {
  bootstrapMedian,
  clusteredSample,
  type ClusteredSample,
  type MedianInterval,
  type MedianMethod,
} from './bootstrap.js';
import { canaryKey, type Observation } from './observation.js';
import { designProportion, type DesignProportion } from './design-proportion.js';
import { median } from './statistics.js';

/**
 * Summary of one arm (the inserted canaries of a group, or one of its controls): median exposure
 * with its bootstrap interval, and proportions with Wilson intervals (the copy rate with one that
 * respects the runs when it pools several), always with their n.
 */
export interface ArmSummary {
  /** Observations (canary × run) pooled. */
  n_obs: number;
  /** Distinct canaries (id + code). */
  n_canaries: number;
  n_runs: number;
  /** Per run, the median exposure of the arm's canaries in it: the run-to-run spread. */
  run_medians: RunMedian[];
  exposure: MedianInterval | null;
  /** Share ranked first (rank 1): ranking first is not the same as greedy recovery. Interval: `pooledProportion`. */
  top1: DesignProportion | null;
  /** Greedy output == true code, per decode mode; null when the mode was not run. Interval: `pooledProportion`. */
  recovery: { prefill: DesignProportion | null; free: DesignProportion | null };
  /**
   * Greedy output == shown code (substituted probes only; null otherwise), pooled over the runs
   * with an interval that respects the runs (`designProportion`) and each run's own count.
   */
  copy: { prefill: DesignProportion | null; free: DesignProportion | null } | null;
}

export interface RunMedian {
  run_id: string;
  median: number;
  n: number;
}

/** The median of each run's observations, runs in order of first appearance. */
export function runMedians(obs: readonly Observation[]): RunMedian[] {
  const byRun = new Map<string, number[]>();
  for (const o of obs) {
    const list = byRun.get(o.run_id);
    if (list) list.push(o.exposure);
    else byRun.set(o.run_id, [o.exposure]);
  }
  return [...byRun].map(([run_id, xs]) => ({ run_id, median: median(xs), n: xs.length }));
}

export interface StatOptions {
  seed: number;
  resamples?: number;
  confidence?: number;
  /** How each resample's median is found (same numbers either way); see BootstrapOptions. */
  median?: MedianMethod;
}

/**
 * The top-1 and recovery rates of an arm: `values[i]` of run `runIds[i]` and canary `unitIds[i]`,
 * with the interval that respects the runs (`designProportion`; Wilson over the canaries for one
 * run). Wilson over all canary × run observations treated them as independent trials: 44–79%
 * coverage where recovery varies from run to run (docs/metrics.md, coverage).
 */
export function pooledProportion(
  values: readonly (boolean | null)[],
  runIds: readonly string[],
  unitIds: readonly string[],
  confidence?: number,
): DesignProportion | null {
  return designProportion(values, runIds, unitIds, confidence);
}

/**
 * Exposures of an arm laid out by run, each with its canary (id + code): the bootstrap reads from
 * them whether canaries are crossed with runs or nested in them (`sampleDesign`).
 */
export function exposuresByRun(obs: readonly Observation[]): ClusteredSample {
  return clusteredSample(
    obs.map((o) => o.exposure),
    obs.map((o) => o.run_id),
    obs.map(canaryKey),
  );
}

export function summarizeArm(obs: readonly Observation[], label: string, options: StatOptions): ArmSummary {
  const exposures = exposuresByRun(obs);
  const substituted = obs.length > 0 && obs.every((o) => o.probe_kind === 'substituted');
  const c = options.confidence;
  const runs = obs.map((o) => o.run_id);
  const units = obs.map(canaryKey);
  return {
    n_obs: obs.length,
    n_canaries: new Set(obs.map(canaryKey)).size,
    n_runs: new Set(obs.map((o) => o.run_id)).size,
    run_medians: runMedians(obs),
    exposure: bootstrapMedian(exposures, {
      seed: options.seed,
      label,
      // Exposure lies in [0, log2|C|] (a group shares one candidate space).
      ...(obs[0] ? { bounds: [0, obs[0].exposure_ceiling] as const } : {}),
      ...(options.resamples !== undefined ? { resamples: options.resamples } : {}),
      ...(c !== undefined ? { confidence: c } : {}),
      ...(options.median !== undefined ? { median: options.median } : {}),
    }),
    top1: pooledProportion(
      obs.map((o) => o.rank === 1),
      runs,
      units,
      c,
    ),
    recovery: {
      prefill: pooledProportion(
        obs.map((o) => o.greedy_prefill?.recovered ?? null),
        runs,
        units,
        c,
      ),
      free: pooledProportion(
        obs.map((o) => o.greedy_free?.recovered ?? null),
        runs,
        units,
        c,
      ),
    },
    copy: substituted ? copyRates(obs, c) : null,
  };
}

/** The copy rate per decode mode over an arm's substituted-probe observations. */
function copyRates(
  obs: readonly Observation[],
  confidence: number | undefined,
): { prefill: DesignProportion | null; free: DesignProportion | null } {
  const runs = obs.map((o) => o.run_id);
  const units = obs.map(canaryKey);
  return {
    prefill: designProportion(
      obs.map((o) => o.greedy_prefill?.copied ?? null),
      runs,
      units,
      confidence,
    ),
    free: designProportion(
      obs.map((o) => o.greedy_free?.copied ?? null),
      runs,
      units,
      confidence,
    ),
  };
}

import { cellLabel, groupCell } from '../metrics/cells.js';
import { canaryKey, type Observation } from '../metrics/observation.js';
import { crossedAuc, type CrossedAuc } from '../metrics/privacy-auc.js';
import { clopperPearsonEpsilon, oneRunBound, type ScoredCanary } from '../metrics/privacy.js';
import { gdpEpsilon } from '../metrics/privacy-gdp.js';
import { fdpOneRunBound, type ThresholdStrategy } from '../metrics/privacy-fdp.js';
import type { LoadedAudit, LoadedRun } from './load-audit.js';

/**
 * The largest ε lower bound over the runs of an audit, made selection-aware: reading off the
 * largest of k bounds is a search, and the largest of k bounds each at 95% holds at less than
 * 95%. Each run's bound is recomputed at 1 − α/k (Bonferroni over the k runs searched), so the
 * largest holds at 1 − α after the search.
 */
export interface MembershipPool {
  run: LoadedRun;
  probe_kind: string;
  randomized: boolean;
  scored: ScoredCanary[];
  /**
   * Each scored canary's identity across runs (id + code), parallel to `scored`. Absent: no
   * canary is known to recur across runs (the cell's AUC interval is then nested).
   */
  keys?: string[];
}

/**
 * Per finished run with inserted and held-out canaries: their final-phase exposures on hidden
 * probes (else the run's first probe kind), inserted canaries members. The pools the privacy
 * readouts use.
 */
export function membershipPools(audit: LoadedAudit, observations: readonly Observation[]): MembershipPool[] {
  const byRun = new Map<string, Observation[]>();
  for (const x of observations) {
    if (x.phase !== 'final' || (x.role !== 'focal' && x.role !== 'held_out')) continue;
    const list = byRun.get(x.run_id);
    if (list) list.push(x);
    else byRun.set(x.run_id, [x]);
  }
  return audit.runs.flatMap((run) => {
    const final = byRun.get(run.run_id);
    if (!final || !run.manifest) return [];
    const kinds = [...new Set(final.map((x) => x.probe_kind))];
    const kind = kinds.includes('hidden') ? 'hidden' : kinds[0];
    if (kind === undefined) return [];
    const chosen = final.filter((x) => x.probe_kind === kind);
    const scored = chosen.map((x) => ({ score: x.exposure, member: x.role === 'focal' }));
    const nIn = scored.filter((x) => x.member).length;
    if (nIn === 0 || nIn === scored.length) return [];
    return [
      {
        run,
        probe_kind: kind,
        randomized: run.manifest.inclusion === 'randomized',
        scored,
        keys: chosen.map((x) => canaryKey(x)),
      },
    ];
  });
}

export interface EpsilonMax {
  bound: 'clopper_pearson' | 'one_run' | 'gdp' | 'fdp_one_run';
  /** The largest bound over the runs searched, each at `confidence_each`. */
  epsilon: number;
  /** The run (and its cell) that gave it; null when every bound is 0. */
  run_id: string | null;
  cell_id: string | null;
  /** Runs searched (k). */
  searched: number;
  /** The level of the largest, after the search. */
  confidence: number;
  /** 1 − (1 − confidence)/k: the level of each run's bound. */
  confidence_each: number;
  delta: number;
}

export function largestEpsilon(
  pools: readonly MembershipPool[],
  delta: number,
  confidence: number,
  strategy: ThresholdStrategy = { kind: 'bonferroni' },
): EpsilonMax[] {
  const out: EpsilonMax[] = [];
  const boundAt = (bound: EpsilonMax['bound'], scored: ScoredCanary[], each: number): number | undefined =>
    (bound === 'one_run'
      ? oneRunBound(scored, delta, each, strategy)
      : bound === 'gdp'
        ? gdpEpsilon(scored, delta, each)
        : bound === 'fdp_one_run'
          ? fdpOneRunBound(scored, delta, each, strategy)
          : clopperPearsonEpsilon(scored, delta, each, strategy)
    )?.epsilon;
  for (const bound of ['clopper_pearson', 'one_run', 'gdp', 'fdp_one_run'] as const) {
    // The one-run bounds exist only for randomized inclusion: only those runs are searched for them.
    const searched = bound === 'one_run' || bound === 'fdp_one_run' ? pools.filter((p) => p.randomized) : pools;
    if (searched.length === 0) continue;
    const each = 1 - (1 - confidence) / searched.length;
    let best: EpsilonMax = {
      bound,
      epsilon: 0,
      run_id: null,
      cell_id: null,
      searched: searched.length,
      confidence,
      confidence_each: each,
      delta,
    };
    for (const p of searched) {
      const eps = boundAt(bound, p.scored, each) ?? 0;
      // Strictly larger: of equal bounds the first run in audit order is named, whatever the order of its canaries.
      if (eps > best.epsilon) best = { ...best, epsilon: eps, run_id: p.run.run_id, cell_id: p.run.cell_id };
    }
    out.push(best);
  }
  return out;
}

/** The membership AUC of one cell over its runs (`crossedAuc`): canaries crossed with runs. */
export interface CellAuc extends CrossedAuc {
  /** The cell without its seed axes (`a=1, b=late`), named by the axes that vary in the audit. */
  cell: string;
  probe_kind: string;
}

/**
 * Per cell (seed axes removed; every other axis, dose included, kept) and probe kind with 2+ runs:
 * the AUC over its runs with the crossed canary × run interval; a cell of one run is left to the
 * per-run table (DeLong). Cells in audit order.
 */
export function cellAucs(
  pools: readonly MembershipPool[],
  options: {
    confidence: number;
    seed: number;
    resamples: number;
    seedAxes: readonly string[];
    labelAxes?: ReadonlySet<string>;
  },
): CellAuc[] {
  const byCell = new Map<string, { label: string; pools: MembershipPool[] }>();
  for (const p of pools) {
    // An empty dose-axis name: no axis is dropped as the dose, so runs of different doses stay apart.
    const cell = groupCell(p.run.cell, { seedAxes: [...options.seedAxes], doseAxis: '' });
    const label = cellLabel(cell, options.labelAxes);
    const key = `${JSON.stringify(Object.entries(cell))}\u0000${p.probe_kind}`;
    const entry = byCell.get(key);
    if (entry) entry.pools.push(p);
    else byCell.set(key, { label, pools: [p] });
  }
  return [...byCell.values()].flatMap(({ label, pools: list }) => {
    if (list.length < 2) return [];
    const auc = crossedAuc(
      list.map((p) => ({
        run_id: p.run.run_id,
        canaries: p.scored.map((c, i) => ({
          key: p.keys?.[i] ?? `${p.run.run_id}\u0000${i}`,
          score: c.score,
          member: c.member,
        })),
      })),
      { confidence: options.confidence, seed: options.seed, resamples: options.resamples },
    );
    return auc ? [{ cell: label, probe_kind: (list[0] as MembershipPool).probe_kind, ...auc }] : [];
  });
}

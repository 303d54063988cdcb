import type { Window } from '../grid/index.js';
import type { Rng } from '../random.js';

/**
 * Where canaries go. A run has `updates` optimizer updates of `batch` rows each; update u consumes
 * rows [u·batch, (u+1)·batch). Canary rows replace background rows, so the budget never changes.
 * Rules, all exact (an impossible request throws, it is never adjusted):
 *  - a canary appears `dose` times, at most once per update, every appearance inside its window;
 *  - with `spacing`, consecutive appearances are exactly `spacing` updates apart;
 *  - with `final`, the last appearance falls inside the final window;
 *  - no row holds two canaries.
 * Update u belongs to window [from, to] when from <= (u + 0.5) / updates < to (to = 1 takes the
 * last update), so early [0, 0.2] and late [0.8, 1] hold equally many updates.
 */
export class InfeasiblePlacement extends Error {
  /** The axis whose value made the request impossible (where the error points in the grid). */
  readonly axis: 'dose' | 'placement' | 'population';

  constructor(message: string, axis: 'dose' | 'placement' | 'population') {
    super(message);
    this.name = 'InfeasiblePlacement';
    this.axis = axis;
  }
}

/** [lo, hi): the updates inside a window of fractions. */
export function updateRange(window: Window, updates: number): [number, number] {
  const lo = Math.max(0, Math.ceil(window[0] * updates - 0.5));
  const hi = window[1] >= 1 ? updates : Math.max(0, Math.ceil(window[1] * updates - 0.5));
  return [lo, Math.max(lo, hi)];
}

/** Row occupancy of one run. */
export class SlotBoard {
  readonly updates: number;
  readonly batch: number;
  private readonly used: Uint8Array;
  private readonly load: Int32Array;

  constructor(updates: number, batch: number) {
    this.updates = updates;
    this.batch = batch;
    this.used = new Uint8Array(updates * batch);
    this.load = new Int32Array(updates);
  }

  hasRoom(u: number): boolean {
    return (this.load[u] as number) < this.batch;
  }

  /** Claim a random free row of update u. */
  take(u: number, rng: Rng): number {
    const free: number[] = [];
    for (let r = u * this.batch; r < (u + 1) * this.batch; r += 1) if (this.used[r] === 0) free.push(r);
    const row = rng.pick(free);
    this.used[row] = 1;
    this.load[u] = (this.load[u] as number) + 1;
    return row;
  }
}

export interface CohortRequest {
  count: number;
  dose: number;
  /** [lo, hi) updates. */
  range: [number, number];
  spacing: number | null;
  /** [lo, hi) updates of the last appearance, or null. */
  final: [number, number] | null;
  /** How messages name the window, e.g. "placement late (updates 154-191)". */
  describe: string;
}

/** Positions (ascending row indices) for each canary of a cohort, in canary order. */
export function placeCohort(board: SlotBoard, rng: Rng, req: CohortRequest): number[][] {
  const [lo, hi] = req.range;
  const span = hi - lo;
  if (span <= 0) throw new InfeasiblePlacement(`${req.describe} holds no update of the ${board.updates}`, 'placement');
  const final = req.final ? ([Math.max(lo, req.final[0]), Math.min(hi, req.final[1])] as [number, number]) : null;
  if (final && final[1] <= final[0]) {
    throw new InfeasiblePlacement(
      `the final-presentation window (updates ${req.final?.[0]}-${(req.final?.[1] ?? 0) - 1}) does not overlap ${req.describe}`,
      'placement',
    );
  }
  if (req.spacing !== null) {
    const need = (req.dose - 1) * req.spacing;
    const firstLast = Math.max(lo + need, final ? final[0] : lo);
    if (firstLast >= (final ? final[1] : hi)) {
      throw new InfeasiblePlacement(
        `dose ${req.dose} with a gap of ${req.spacing} updates spans ${need + 1} updates, which cannot fit in ${req.describe}${final ? ' with its final window' : ''}; lower the gap or the dose, or widen the window`,
        'placement',
      );
    }
  } else if (req.dose > span) {
    throw new InfeasiblePlacement(
      `dose ${req.dose} needs ${req.dose} distinct updates but ${req.describe} spans only ${span}; lower the dose, widen the window, or train more updates`,
      'dose',
    );
  }

  const out: number[][] = [];
  for (let j = 0; j < req.count; j += 1) {
    const chosen = chooseUpdates(board, rng, req, lo, hi, final);
    if (!chosen) {
      throw new InfeasiblePlacement(
        `no room for canary ${j + 1} of ${req.count} at dose ${req.dose} in ${req.describe}: its updates are full (${board.batch} rows each); use fewer or lower-dose canaries, a wider window, or a larger batch`,
        'population',
      );
    }
    out.push(chosen.map((u) => board.take(u, rng)).sort((a, b) => a - b));
  }
  return out;
}

function chooseUpdates(
  board: SlotBoard,
  rng: Rng,
  req: CohortRequest,
  lo: number,
  hi: number,
  final: [number, number] | null,
): number[] | undefined {
  const d = req.dose;
  if (req.spacing !== null) {
    const s = req.spacing;
    const lasts: number[] = [];
    for (let u = Math.max(lo + (d - 1) * s, final ? final[0] : lo); u < (final ? final[1] : hi); u += 1) {
      let ok = true;
      for (let k = 0; k < d && ok; k += 1) ok = board.hasRoom(u - k * s);
      if (ok) lasts.push(u);
    }
    if (lasts.length === 0) return undefined;
    const last = rng.pick(lasts);
    return Array.from({ length: d }, (_, k) => last - (d - 1 - k) * s);
  }
  const open: number[] = [];
  for (let u = lo; u < hi; u += 1) if (board.hasRoom(u)) open.push(u);
  if (!final) return open.length >= d ? rng.sample(open, d) : undefined;
  // The last appearance goes in the final window; the others anywhere earlier in the window.
  const lasts = open.filter((u, idx) => u >= final[0] && u < final[1] && idx >= d - 1);
  if (lasts.length === 0) return undefined;
  const last = rng.pick(lasts);
  const earlier = open.filter((u) => u < last);
  return [...rng.sample(earlier, d - 1), last];
}

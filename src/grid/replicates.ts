import type { ReplicationDesign } from './design.js';
/**
 * Which comparisons of a grid rest on a single run per arm. Two cells that differ in exactly one
 * axis other than the seed are a comparison (the report pairs them); when each holds one run (one
 * seed), its interval covers canary sampling only, and a rerun — another seed, another
 * floating-point path — can land outside it.
 */
export interface ReplicateCell {
  labels: Record<string, string | number | null>;
}

export interface SingleRunComparison {
  axis: string;
  from: string;
  to: string;
  /** The axes the two cells share that vary in the grid (seed left out), as `axis=value` pairs. */
  context: string;
}

const SEED_AXIS = 'seed';

function armKey(labels: ReplicateCell['labels']): string {
  return JSON.stringify(
    Object.keys(labels)
      .filter((k) => k !== SEED_AXIS)
      .sort()
      .map((k) => [k, labels[k] ?? null]),
  );
}

/** Comparisons (cell pairs differing in one non-seed axis) where both cells have exactly one run. */
export function singleRunComparisons(cells: readonly ReplicateCell[]): SingleRunComparison[] {
  const arms = new Map<string, { labels: ReplicateCell['labels']; runs: number }>();
  for (const c of cells) {
    const key = armKey(c.labels);
    const arm = arms.get(key);
    if (arm) arm.runs += 1;
    else arms.set(key, { labels: c.labels, runs: 1 });
  }
  const single = [...arms.values()].filter((a) => a.runs === 1);
  const varies = (k: string): boolean => new Set(cells.map((c) => String(c.labels[k] ?? null))).size > 1;
  const out: SingleRunComparison[] = [];
  for (let i = 0; i < single.length; i += 1) {
    for (let j = i + 1; j < single.length; j += 1) {
      const a = (single[i] as { labels: ReplicateCell['labels'] }).labels;
      const b = (single[j] as { labels: ReplicateCell['labels'] }).labels;
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => k !== SEED_AXIS).sort();
      const differ = keys.filter((k) => String(a[k] ?? null) !== String(b[k] ?? null));
      if (differ.length !== 1) continue;
      const axis = differ[0] as string;
      const context = keys
        .filter((k) => k !== axis && a[k] !== null && a[k] !== undefined && varies(k))
        .map((k) => `${k}=${String(a[k])}`)
        .join(', ');
      out.push({ axis, from: String(a[axis] ?? null), to: String(b[axis] ?? null), context });
    }
  }
  return out;
}

/** `visibility visible → redacted (dose=1, …)` */
export function comparisonText(c: SingleRunComparison): string {
  return `${c.axis} ${c.from} → ${c.to}${c.context ? ` (${c.context})` : ''}`;
}

/**
 * What a seed value varies besides the model init and the training seed: under joint seeds (the
 * default where a tiny base is pretrained and 2+ seeds run, or `replicates: {vary: joint | base}`)
 * each seed draws its own background order and canary placement, so those streams' keys take the
 * seed; otherwise (`training`, or a grid the default leaves alone) nothing is added and the
 * streams, the rows and the manifests are exactly those of a grid without the key.
 */
export function jointSeeds(grid: { design: Pick<ReplicationDesign, 'joint'> }): boolean {
  return grid.design.joint;
}

/** Extra stream-key parts of a cell's background and placement draws: none unless seeds are joint. */
export function replicateKey(grid: { design: Pick<ReplicationDesign, 'joint'> }, seed: number): (string | number)[] {
  return jointSeeds(grid) ? ['replicate', seed] : [];
}

import { spaceSize } from '../codes/index.js';
import {
  codeSpaceOf,
  formatPath,
  type AxisValue,
  type Cell,
  type DesignValue,
  type LoadedGrid,
} from '../grid/index.js';
import type { CanaryPool } from './canaries.js';
import type { DesignSecrets } from './designs.js';
import { designShare, togetherSpace } from './designs-together.js';
import { CellPlanError, layoutRun, type RunLayout } from './plan-run.js';
import type { Task } from './tasks/index.js';

/**
 * Lay out one run holding several designs' canaries: each canary takes its secret from its
 * design's pool (`made`: a non-codes design's pool and secrets, null for codes: the grid's own
 * pool), the placement is the one run's.
 */
export function togetherLayout(
  grid: LoadedGrid,
  cell: Cell,
  list: readonly AxisValue<DesignValue>[],
  pool: CanaryPool,
  made: (design: AxisValue<DesignValue>) => { pool: CanaryPool; secrets: DesignSecrets } | null,
  task: Task,
): RunLayout {
  const { doc } = grid;
  const codes = codeSpaceOf(doc);
  const parts = list.map((design) => {
    const own = made(design);
    if (own)
      return {
        label: design.label,
        pool: own.pool,
        secrets: own.secrets,
        space: own.secrets.space,
        size: 1 + own.secrets.decoys,
      };
    const size = doc.candidates.kind === 'sampled' ? 1 + (doc.candidates.decoys as number) : spaceSize(codes);
    return { label: design.label, pool, secrets: null, space: codes, size };
  });
  const joined = togetherSpace(parts);
  if ('problem' in joined) {
    const path = ['canaries', 'designs'];
    throw new CellPlanError(cell.id, joined.problem, {
      location: grid.source.locate(path),
      field: formatPath(path),
      code: 'E_DESIGN',
    });
  }
  const shares = new Map(pool.all().map((c) => [c.id, designShare(c.id, doc.canaries.focal, parts.length)]));
  const mixed = pool.together(
    parts.map((p) => p.pool),
    (id) => shares.get(id) ?? 0,
  );
  return {
    ...layoutRun(grid, mixed, cell, task),
    together: {
      designs: parts.map(({ label, space, secrets }) => ({ label, space, secrets })),
      size: joined.size,
      space: joined.space,
      shares,
    },
  };
}

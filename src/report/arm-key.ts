import { canonicalJson } from '../hash.js';

/**
 * A cell's arm as a canonical key: its labels without the seed axes and without null values (the
 * cells that differ only in the seed are one arm). Sequential replicates add seeds per arm.
 */
export function armKey(cell: Record<string, unknown>, seedAxes: readonly string[] = ['seed']): string {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(cell)) if (!seedAxes.includes(k) && v !== null && v !== undefined) out[k] = v;
  return canonicalJson(out);
}

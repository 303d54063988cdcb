import { AXES, type Cell, type GridDocument } from './types.js';
import type { GridPath } from './source.js';

/**
 * `canaries.designs: together`: the cells that differ only in their design become one cell whose
 * run holds every design's canaries (`Cell.designs`, in expansion order, which is the axis order;
 * `values.design` is the first). Its design label joins the designs' labels with `+`
 * (`codes+rare-tokens`) and its id drops the design part, since one run now serves them all. A
 * cell left with one design (the others excluded) stays as it was. Pure and order-keeping.
 */
export function designsTogether(cells: readonly Cell[]): Cell[] {
  const groups = new Map<string, Cell[]>();
  for (const cell of cells) {
    const key = JSON.stringify(AXES.filter((a) => a !== 'design').map((a) => cell.values[a]?.key ?? null));
    const list = groups.get(key);
    if (list) list.push(cell);
    else groups.set(key, [cell]);
  }
  return [...groups.values()].map((group) => {
    const first = group[0] as Cell;
    const designs = group
      .map((c) => c.values.design)
      .filter((d, i, all) => all.findIndex((x) => x.key === d.key) === i);
    if (designs.length < 2) return first;
    return {
      id: withoutDesignPart(first.id, first.labels.design),
      values: first.values,
      designs,
      labels: { ...first.labels, design: designs.map((d) => d.label).join('+') },
    };
  });
}

/** `visibility=redacted,design=codes,seed=0` → `visibility=redacted,seed=0` (labels may hold commas). */
function withoutDesignPart(id: string, label: string | number | null): string {
  const part = `design=${String(label)}`;
  const out = id === part ? '' : id.replace(`${part},`, '').replace(`,${part}`, '');
  return out === '' ? 'default' : out;
}

/**
 * Why `canaries.designs: together` cannot split this grid's canaries, or null: it needs a design
 * axis of two or more designs, none of them sampled-text (its texts are sampled by the trainer), and
 * canary counts the designs divide (fixed inclusion: the focal and the held-out counts; randomized:
 * their sum, the pool the coins are drawn for).
 */
export function togetherProblem(
  doc: Pick<GridDocument, 'canaries'>,
  cells: readonly Cell[],
): { path: GridPath; message: string } | null {
  if (doc.canaries.designs !== 'together') return null;
  const path: GridPath = ['canaries', 'designs'];
  const counts = [...new Set(cells.flatMap((c) => (c.designs ? [c.designs.length] : [])))];
  if (counts.length === 0)
    return {
      path,
      message:
        'together puts several designs in one run, but no cell has two or more; list them on the design axis, e.g. design: [codes, rare-tokens], or remove canaries.designs',
    };
  const sampled = cells.find((c) => c.designs?.some((d) => d.value.kind === 'sampled-text'));
  if (sampled)
    return {
      path,
      message:
        "design sampled-text cannot share a run with other designs yet: the trainer samples its texts into placeholders that differ in length from the other designs' secrets; remove canaries.designs (its runs then pair with the other designs' by seed) or drop sampled-text from this grid",
    };
  const { focal, held_out: heldOut } = doc.canaries;
  for (const d of counts) {
    if (doc.canaries.inclusion === 'randomized' ? (focal + heldOut) % d !== 0 : focal % d !== 0 || heldOut % d !== 0)
      return {
        path,
        message:
          doc.canaries.inclusion === 'randomized'
            ? `${d} designs together split the ${focal + heldOut} canaries (focal + held_out) into equal shares; make focal + held_out a multiple of ${d}`
            : `${d} designs together split the ${focal} focal and ${heldOut} held-out canaries into equal shares; make canaries.focal and canaries.held_out multiples of ${d}`,
      };
  }
  return null;
}

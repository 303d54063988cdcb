/**
 * Cell ids name the axes that vary across an audit (`visibility=redacted,dose=8`). These helpers
 * split them into columns, so a view shows every distinguishing value in full instead of cutting a
 * long id short.
 */
export function parseCellId(cellId: string): Record<string, string> {
  const out: Record<string, string> = {};
  // Split at a comma that starts the next `axis=`: values may hold commas themselves.
  for (const part of cellId.split(/,(?=[A-Za-z_][\w.-]*=)/)) {
    const eq = part.indexOf('=');
    if (eq <= 0) out.cell = part;
    else out[part.slice(0, eq)] = part.slice(eq + 1);
  }
  return out;
}

/** Axes whose value differs between the given cell ids, in first-seen order. */
export function varyingCellAxes(cellIds: string[]): string[] {
  const values = new Map<string, Set<string>>();
  const parsed = cellIds.map(parseCellId);
  for (const cell of parsed)
    for (const [k, v] of Object.entries(cell)) (values.get(k) ?? values.set(k, new Set()).get(k)!).add(v);
  const axes = [...values.keys()];
  const varying = axes.filter((k) => (values.get(k)?.size ?? 0) > 1 || parsed.some((c) => !(k in c)));
  return varying.length ? varying : axes;
}

/** A fixed-width text column per varying axis: the header and each cell id's row, padded. */
export function cellColumns(cellIds: string[]): { header: string; row(cellId: string): string } {
  const axes = varyingCellAxes(cellIds);
  const widths = axes.map((a) => Math.max(a.length, ...cellIds.map((id) => (parseCellId(id)[a] ?? '-').length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i] as number)).join(' ');
  return {
    header: line(axes),
    row: (cellId) => {
      const cell = parseCellId(cellId);
      return line(axes.map((a) => cell[a] ?? '-'));
    },
  };
}

import { num } from './format.js';
import type { ReportSummary } from './summary.js';

/**
 * The report's "Sequential looks" section (an audit with `replicates: {until: decided}`): one row
 * per look (seeds, the α it spent and tested by itself, what stayed open) and one per comparison
 * (why it stopped). Null for a fixed grid. (A document Section, typed here by shape: document.ts
 * imports this file.)
 */
export function sequentialLooks(s: ReportSummary): {
  id: string;
  title: string;
  paragraphs: string[];
  tables: { caption: string; columns: string[]; rows: string[][] }[];
} | null {
  const q = s.sequential;
  if (!q) return null;
  const rule = q.spending === 'pocock' ? 'Pocock-type' : "O'Brien–Fleming-type";
  return {
    id: 'sequential',
    title: 'Sequential looks',
    paragraphs: [
      `Seeds were added while a declared comparison was undecided: ${q.min} to at most ${q.max} seeds per cell, one look per seed, α = ${num(q.alpha, 3)} spent over the looks by a ${rule} (Lan–DeMets) function. Each look's own α is tested by itself (Holm over the comparisons still open, intervals at 1 − that α), so the family-wise error over all looks stays ≤ ${num(q.alpha, 3)}; each verdict and its interval are the ones read at the look where the comparison stopped. ${q.done ? 'Every comparison has stopped.' : 'The looks are not finished: open comparisons are read over the runs so far at the report level, which is not a sequential verdict.'}`,
    ],
    tables: [
      {
        caption: 'Looks',
        columns: ['Look', 'Seeds', 'α this look', 'α spent', 'Undecided after', 'Stopped here'],
        rows: q.looks.map((l) => [
          String(l.look),
          String(l.seeds),
          num(l.alpha, 4),
          num(l.spent, 4),
          String(l.open.length),
          l.stopped.join('; ') || '—',
        ]),
      },
      {
        caption: 'Why each comparison stopped',
        columns: ['Comparison', 'Stopped', 'Look', 'Seeds', 'α'],
        rows: q.comparisons.map((c) => [
          c.comparison,
          c.reason === 'decided' ? 'decided' : c.reason === 'max' ? 'reached max seeds' : 'still open',
          c.look === null ? '—' : String(c.look),
          c.seeds === null ? '—' : String(c.seeds),
          c.alpha === null ? '—' : num(c.alpha, 4),
        ]),
      },
    ],
  };
}

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  readAuditIndex,
  readSequentialRecord,
  SEQUENTIAL_VERSION,
  writeSequentialRecord,
  type AuditRunEntry,
  type SequentialRecord,
} from '../contracts/index.js';
import { auditIndexPath, GRID_FILE } from '../layout.js';
import { DEFAULT_CONFIDENCE } from '../metrics/bootstrap.js';
import {
  applyLook,
  lookLine,
  lookSchedule,
  type Look,
  type LookReading,
  type SpendingFunction,
} from '../metrics/sequential.js';
import type { SequentialProgress, SubmitAuditInput } from '../queue/index.js';
import { armKey, computeReport, declaredFamily, verdicts, type ComparisonVerdict } from '../report/index.js';
import { num } from '../report/format.js';
import { progressOf } from '../queue/sequential-status.js';

/**
 * Sequential replicates, the controller's side (the stopping rule is metrics/sequential.ts): which
 * runs each look takes, how a look is read from the finished runs, and the record that lets an
 * interrupted audit continue. Pure where it can be: `lookRuns` and `readingsOf` take data, not
 * files; `readLook` computes the report's groups at the look's level.
 */
export interface SequentialGrid {
  min: number;
  max: number;
  spending: SpendingFunction;
}

/** The grid's `replicates: {until: decided, …}` from the audit's grid.yaml (validated when planned), or null. */
export async function sequentialOfAudit(auditDir: string): Promise<SequentialGrid | null> {
  let text: string;
  try {
    text = await readFile(join(auditDir, GRID_FILE), 'utf8');
  } catch {
    return null;
  }
  const r = (parseYaml(text) as { replicates?: Record<string, unknown> } | null)?.replicates;
  if (r?.until !== 'decided' || typeof r.min !== 'number' || typeof r.max !== 'number') return null;
  return { min: r.min, max: r.max, spending: r.spending === 'obrien-fleming' ? 'obrien-fleming' : 'pocock' };
}

/** A fresh record: the schedule, and the first look's runs (the first `min` seeds of every cell) taken. */
export function startRecord(
  grid: SequentialGrid,
  seeds: readonly (number | string)[],
  entries: readonly Pick<AuditRunEntry, 'run_id' | 'cell'>[],
  alpha = 1 - DEFAULT_CONFIDENCE,
): SequentialRecord {
  const schedule = lookSchedule({ ...grid, alpha });
  return {
    schema_version: SEQUENTIAL_VERSION,
    ...grid,
    alpha,
    seeds: [...seeds],
    schedule,
    taken: lookRuns(entries, seeds, (schedule[0] as Look).seeds, null, []),
    pending_look: 1,
    looks: [],
    stopped: [],
    done: false,
  };
}

/**
 * Runs a look takes: those already taken, then every run whose seed is among the first `count`
 * seeds and whose arm is in `arms` (null: every arm), in plan order.
 */
export function lookRuns(
  entries: readonly Pick<AuditRunEntry, 'run_id' | 'cell'>[],
  seeds: readonly (number | string)[],
  count: number,
  arms: ReadonlySet<string> | null,
  taken: readonly string[],
): string[] {
  const first = new Set(seeds.slice(0, count).map(String));
  const out = [...taken];
  const have = new Set(taken);
  for (const e of entries) {
    if (have.has(e.run_id) || !first.has(String(e.cell.seed))) continue;
    if (arms && !arms.has(armKey(e.cell))) continue;
    out.push(e.run_id);
    have.add(e.run_id);
  }
  return out;
}

/**
 * Arms that get the next seed: those the open comparisons rest on, and — while any comparison is
 * open — every arm no declared comparison names (a no-canary control, a cell the family does not
 * compare), so the runs that back the open comparisons keep their usual company.
 */
export function nextArms(
  open: readonly string[],
  family: readonly { comparison: string; arms: string[] }[],
  allArms: readonly string[],
): Set<string> {
  if (open.length === 0) return new Set();
  const openSet = new Set(open);
  const named = new Set(family.flatMap((m) => m.arms));
  return new Set([
    ...family.filter((m) => openSet.has(m.comparison)).flatMap((m) => m.arms),
    ...allArms.filter((a) => !named.has(a)),
  ]);
}

/**
 * Designs together (`canaries.designs: together`): the report reads a run's canaries of one design
 * as that design's cell, so a comparison names per-design arms (`design: codes`) that match no run
 * (the run's cell says `design: codes+rare-tokens`). This maps each such per-design arm to the arm
 * of the runs that hold it, from the designs the runs' canaries carry (`observations`); a seed
 * added for a design's comparison is a seed of the run all its designs share.
 */
export function togetherArms(
  entries: readonly Pick<AuditRunEntry, 'run_id' | 'cell'>[],
  observations: Iterable<{ run_id: string; design?: string }>,
): Map<string, string> {
  const cellOf = new Map(entries.map((e) => [e.run_id, e.cell as Record<string, unknown>]));
  const seen = new Set<string>();
  const out = new Map<string, string>();
  for (const o of observations) {
    if (o.design === undefined) continue;
    const key = `${o.run_id}\u0001${o.design}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const cell = cellOf.get(o.run_id);
    if (cell) out.set(armKey({ ...cell, design: o.design }), armKey(cell));
  }
  return out;
}

/** The family with each comparison's arms as run arms (`togetherArms`; other arms unchanged, each once). */
export function onRunArms<M extends { arms: string[] }>(family: readonly M[], arms: ReadonlyMap<string, string>): M[] {
  return family.map((m) => ({ ...m, arms: [...new Set(m.arms.map((a) => arms.get(a) ?? a))] }));
}

/** A look's readings from the verdicts read at its level, each sentence saying where the looks stand. */
export function readingsOf(
  read: readonly ComparisonVerdict[],
  family: readonly { comparison: string; arms: string[] }[],
  look: Look,
  looks: number,
): LookReading[] {
  const arms = new Map(family.map((m) => [m.comparison, m.arms]));
  return read.map((v) => {
    const when = `look ${look.look} of ${looks}, ${look.seeds} seeds, α ${num(look.alpha, 4)} spent at this look`;
    const sentence = v.sentence.replace(/\.$/, `; sequential: ${when}.`);
    return {
      comparison: v.comparison,
      arms: arms.get(v.comparison) ?? [],
      // The family's reading (Holm over the open comparisons at this look's α).
      verdict: v.adjusted.verdict,
      within_margin: v.adjusted.within_margin,
      estimate: v.estimate,
      lo: v.lo,
      hi: v.hi,
      n_runs: v.n_runs,
      sentence,
      detail: { ...v, sentence },
    };
  });
}

/** Read a look: the report's groups over the taken runs at level 1 − α_k, the open comparisons' verdicts. */
export async function readLook(
  auditDir: string,
  record: SequentialRecord,
  look: Look,
  resamples?: number,
): Promise<{ readings: LookReading[]; family: { comparison: string; arms: string[] }[] }> {
  const { summary, observations } = await computeReport({
    auditDir,
    confidence: 1 - look.alpha,
    sequential: false,
    ...(resamples !== undefined ? { resamples } : {}),
  });
  const index = await readAuditIndex(auditIndexPath(auditDir));
  const family = onRunArms(declaredFamily(summary), togetherArms(index.runs, observations));
  const stopped = new Set(record.stopped.map((s) => s.comparison));
  const open = new Set(family.map((m) => m.comparison).filter((c) => !stopped.has(c)));
  const margin = summary.verdicts?.[0]?.margin_bits;
  const read = verdicts(summary, margin, open);
  return { readings: readingsOf(read, family, look, record.schedule.length), family };
}

export { progressOf };

export interface LookDriver {
  /** Queue the taken runs (first look: submit; later: extend the audit) with where the looks stand. */
  queue(runs: SubmitAuditInput['runs'], progress: SequentialProgress): Promise<void>;
  /** Wait until every queued run ended; false when interrupted. */
  wait(): Promise<boolean>;
  /** One line per look read. */
  say(line: string): void;
  /** Bootstrap resamples per interval when a look is read (default: the report's). */
  resamples?: number;
}

/**
 * The looks, from wherever the record stands: queue the pending look's runs, wait for them, read
 * the look, stop what is decided, take the next seed for the arms still needed; until done or
 * interrupted. Returns the record as it stands.
 */
export async function runLooks(
  auditDir: string,
  input: SubmitAuditInput,
  grid: SequentialGrid,
  driver: LookDriver,
): Promise<SequentialRecord> {
  const index = await readAuditIndex(auditIndexPath(auditDir));
  let record =
    (await readSequentialRecord(auditDir)) ?? startRecord(grid, index.axes.seed ?? [], index.runs as AuditRunEntry[]);
  await writeSequentialRecord(auditDir, record);
  const byId = new Map(input.runs.map((r) => [r.runId, r]));
  const allArms = [...new Set(index.runs.map((e) => armKey(e.cell)))];
  let familySize: number | null = null;
  const taken = (): SubmitAuditInput['runs'] =>
    record.taken.map((id) => byId.get(id)).filter((r): r is SubmitAuditInput['runs'][number] => r !== undefined);
  while (record.pending_look !== null) {
    await driver.queue(taken(), progressOf(record, familySize));
    if (!(await driver.wait())) return record;
    const look = record.schedule[record.pending_look - 1] as Look;
    const { readings, family } = await readLook(auditDir, record, look, driver.resamples);
    familySize = family.length;
    const state = applyLook(
      { looks: record.looks, stopped: record.stopped, next_arms: [], done: false },
      look,
      readings,
      record.schedule,
    );
    const decided = state.stopped.filter((s) => s.reason === 'decided').length;
    driver.say(lookLine(state.looks.at(-1) as SequentialRecord['looks'][number], record.max, decided));
    const next = state.done ? null : (record.schedule[look.look] as Look);
    record = {
      ...record,
      looks: state.looks,
      stopped: state.stopped,
      done: state.done,
      pending_look: next ? next.look : null,
      taken: next
        ? lookRuns(
            index.runs,
            record.seeds,
            next.seeds,
            nextArms(state.looks.at(-1)?.open ?? [], family, allArms),
            record.taken,
          )
        : record.taken,
    };
    await writeSequentialRecord(auditDir, record);
  }
  await driver.queue(taken(), progressOf(record, familySize));
  return record;
}

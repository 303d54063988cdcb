import { rm } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  SEQUENTIAL_VERSION,
  writeSequentialRecord,
  type SequentialRecord,
  type StoppedComparison,
} from '../../src/contracts/index.js';
import { diskAuditView } from '../../src/dashboard/source.js';
import { lookSchedule } from '../../src/metrics/sequential.js';
import { buildFixtureAudit, type FixtureAudit } from '../fixtures/audit-builder.js';

/**
 * `dashboard --audit DIR` with no Redis, on an audit with sequential replicates: the runs the looks
 * took (not every seed the grid plans), where the looks stand as `status` says it live, and a line
 * per look read, from the audit's sequential.json.
 */
let root: string;
let audit: FixtureAudit;
const SEEDS = [0, 1, 2];
const VISIBLE = 'visibility=visible: inserted − held-out control';
const REDACTED = 'visibility=redacted: inserted − held-out control';

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'ca-dashboard-seq-'));
  const canaries = (visibility: string) =>
    Array.from({ length: 3 }, (_, i) => ({ id: `f00${i}`, code: String(1000 + 17 * i), dose: 4, visibility }));
  const heldOut = Array.from({ length: 3 }, (_, i) => ({ id: `h00${i}`, code: String(5000 + 31 * i) }));
  audit = await buildFixtureAudit(root, {
    name: 'seq-disk',
    axes: { visibility: ['visible', 'redacted'], dose: [4], seed: SEEDS },
    runs: ['visible', 'redacted'].flatMap((visibility) =>
      SEEDS.map((seed) => ({ cell: { visibility, dose: 4, seed }, canaries: canaries(visibility), heldOut })),
    ),
    outcome: () => ({ rank: 10 }),
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const idOf = (visibility: string, seed: number): string =>
  (audit.runs.find((r) => r.spec.cell.visibility === visibility && r.spec.cell.seed === seed) as { runId: string })
    .runId;

function stop(comparison: string, reason: StoppedComparison['reason'], look: number): StoppedComparison {
  return {
    comparison,
    arms: [],
    verdict: reason === 'decided' ? 'higher' : 'undecided',
    within_margin: false,
    estimate: 3,
    lo: 1,
    hi: 5,
    n_runs: look + 1,
    sentence: '',
    reason,
    look,
    seeds: look + 1,
    alpha: 0.01,
  };
}

/** Look 1 read at 2 seeds (redacted decided, visible open); visible seed 2 taken for look 2. */
function record(done: boolean): SequentialRecord {
  const schedule = lookSchedule({ min: 2, max: 3, spending: 'pocock', alpha: 0.05 });
  const [first, second] = schedule as [(typeof schedule)[number], (typeof schedule)[number]];
  const look = (l: typeof first, open: string[], stopped: string[]) => ({
    look: l.look,
    seeds: l.seeds,
    alpha: l.alpha,
    spent: l.spent,
    open,
    stopped,
  });
  return {
    schema_version: SEQUENTIAL_VERSION,
    min: 2,
    max: 3,
    spending: 'pocock',
    alpha: 0.05,
    seeds: SEEDS,
    schedule,
    taken: [idOf('visible', 0), idOf('visible', 1), idOf('redacted', 0), idOf('redacted', 1), idOf('visible', 2)],
    pending_look: done ? null : 2,
    looks: [look(first, [VISIBLE], [REDACTED]), ...(done ? [look(second, [], [VISIBLE])] : [])],
    stopped: [stop(REDACTED, 'decided', 1), ...(done ? [stop(VISIBLE, 'max', 2)] : [])],
    done,
  };
}

describe('the dashboard from disk, sequential replicates', () => {
  it('a fixed grid shows every run and no looks', async () => {
    const view = await diskAuditView(audit.auditDir);
    expect(view.total).toBe(6);
    expect(view.looks).toBeUndefined();
    expect(view.look_lines).toBeUndefined();
  });

  it('looks under way: the runs taken, "seed k of ≤max: n comparisons undecided", a line per look', async () => {
    await writeSequentialRecord(audit.auditDir, record(false));
    const view = await diskAuditView(audit.auditDir);
    expect(view.source).toBe('disk');
    expect(view.total).toBe(5);
    expect(view.runs.map((r) => r.run_id)).not.toContain(idOf('redacted', 2));
    // Every taken run has its result, but the looks are not done: not finished.
    expect(view.state).toBe('stopped');
    expect(view.looks).toBe('seed 3 of ≤3: 1 comparison undecided');
    expect(view.look_lines).toEqual(['look 1: seed 2 of ≤3 — 1 comparison undecided, 1 decided (stopped)']);
  });

  it('looks done: finished, with why they stopped', async () => {
    await writeSequentialRecord(audit.auditDir, record(true));
    const view = await diskAuditView(audit.auditDir);
    expect(view.state).toBe('finished');
    expect(view.completed).toBe(5);
    expect(view.looks).toBe('seed 3 of ≤3: done, 1 decided, 1 comparison undecided');
    expect(view.look_lines).toEqual([
      'look 1: seed 2 of ≤3 — 1 comparison undecided, 1 decided (stopped)',
      'look 2: seed 3 of ≤3 — 0 comparisons undecided, 1 decided (stopped)',
    ]);
  });
});

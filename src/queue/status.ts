import { Job, type JobJsonRaw, type Queue } from 'bullmq';
import { UserInputError, quoteValue } from '../errors.js';
import type { AuditJobData, AuditReturn, RunJobData, RunProgress, RunReturn, SequentialProgress } from './job-data.js';
import type { Redis } from 'ioredis';
import { openQueues, openRedis, type QueueConnection, type QueueHandles } from './queues.js';

/**
 * A snapshot of audits and their runs as Redis holds them: what `status` prints and `--json` emits.
 * Runs that cancel removed from the queue are still listed (state `cancelled`), from the audit
 * parent's run list and the cancelled-runs record.
 */
/**
 * A run's state as `status` shows it. BullMQ's own job states are mapped onto these (its internal
 * names — prioritized, paused, waiting-children — never leave this module):
 * - `waiting`: queued, its turn not come (BullMQ waiting, prioritized, paused, waiting-children);
 * - `active`: a worker runs it;
 * - `delayed`: waiting for a retry after a failed attempt;
 * - `completed`, `failed`: done (failed for good: attempts used up, or a failure not worth retrying);
 * - `cancelled`: stopped or removed by `cancel`;
 * - `unknown`: no job in Redis and no cancel record.
 */
export type RunState = 'waiting' | 'active' | 'delayed' | 'completed' | 'failed' | 'cancelled' | 'unknown';

export const RUN_STATES: readonly RunState[] = [
  'waiting',
  'active',
  'delayed',
  'completed',
  'failed',
  'cancelled',
  'unknown',
];

/** BullMQ's state of a job → the documented run state. */
export function runStateOf(jobState: string): RunState {
  switch (jobState) {
    case 'waiting':
    case 'prioritized':
    case 'paused':
    case 'waiting-children':
      return 'waiting';
    case 'active':
    case 'delayed':
    case 'completed':
    case 'failed':
      return jobState;
    default:
      return 'unknown';
  }
}

export interface RunStatus {
  run_id: string;
  cell_id: string;
  state: RunState;
  /** Attempts BullMQ counted as made (failures); the running attempt is attempts_made + 1. */
  attempts_made: number;
  max_attempts: number;
  /** Progress of the current or last attempt (host, GPU, update/total, loss, rows/s, ETA...). */
  progress: RunProgress | null;
  /** Why the run failed (last attempt), or why it is delayed for a retry. */
  failure: string | null;
  /** result.json relative to the artifact root, once completed. */
  result: string | null;
  started: string | null;
  finished: string | null;
  /**
   * Active runs only: whether a worker still holds the run's lock. False means its worker died or
   * lost Redis; another worker takes the run at its next stalled-job check, if any is alive.
   */
  worker_alive?: boolean;
}

export type AuditState = 'queued' | 'running' | 'finished' | 'cancelling' | 'cancelled';

export interface AuditStatus {
  audit_id: string;
  name: string;
  state: AuditState;
  submitted: string;
  cancelled_at: string | null;
  /** Runs per state. */
  counts: Partial<Record<RunState, number>>;
  runs: RunStatus[];
  /** The audit parent's summary once every run is done. */
  summary: AuditReturn | null;
  /** Sequential replicates: where the looks stand (absent for a fixed grid). */
  sequential?: SequentialProgress;
}

const AUDIT_STATES = [
  'waiting-children',
  'waiting',
  'active',
  'delayed',
  'prioritized',
  'completed',
  'failed',
] as const;

/** Open handles a long-lived reader (the dashboard's poller) passes to reuse its connections. */
export interface StatusHandles {
  queues: QueueHandles;
  client: Redis;
}

export async function collectStatus(
  conn: QueueConnection,
  auditId?: string,
  shared?: StatusHandles,
): Promise<AuditStatus[]> {
  const queues = shared?.queues ?? openQueues(conn);
  const client = shared?.client ?? openRedis(conn);
  try {
    let parents: Job<AuditJobData, AuditReturn>[];
    if (auditId !== undefined) {
      const parent = await queues.audits.getJob(auditId);
      if (!parent) {
        throw new UserInputError(
          `no audit ${quoteValue(auditId)} on this Redis (${conn.redacted}); run \`canary-audit status\` to list audits`,
          {
            code: 'E_NO_AUDIT',
          },
        );
      }
      parents = [parent];
    } else {
      parents = (await queues.audits.getJobs([...AUDIT_STATES])).filter((j): j is Job<AuditJobData, AuditReturn> =>
        Boolean(j),
      );
      parents.sort((a, b) => a.timestamp - b.timestamp);
    }
    const out: AuditStatus[] = [];
    for (const parent of parents) {
      const id = parent.data.audit_id;
      const [parentState, cancelledAt, cancelledRuns] = await Promise.all([
        parent.getState(),
        client.get(conn.keys.cancelled(id)),
        client.hgetall(conn.keys.cancelledRuns(id)),
      ]);
      const runs = await readRuns(client, queues.runs, parent.data.runs, cancelledRuns);
      const counts: Partial<Record<RunState, number>> = {};
      for (const run of runs) counts[run.state] = (counts[run.state] ?? 0) + 1;
      const finished = parentState === 'completed' || parentState === 'failed';
      let state: AuditState;
      // Cancelled once nothing runs any more, even before a worker has closed the audit parent.
      if (cancelledAt) state = finished || (counts.active ?? 0) === 0 ? 'cancelled' : 'cancelling';
      else if (finished) state = 'finished';
      else if ((counts.active ?? 0) > 0 || (counts.completed ?? 0) + (counts.failed ?? 0) > 0) state = 'running';
      else state = 'queued';
      out.push({
        audit_id: id,
        name: parent.data.name,
        state,
        submitted: parent.data.submitted,
        cancelled_at: cancelledAt,
        counts,
        runs,
        summary: parentState === 'completed' ? ((parent.returnvalue as AuditReturn | null) ?? null) : null,
        ...(parent.data.sequential ? { sequential: parent.data.sequential } : {}),
      });
    }
    return out;
  } finally {
    if (!shared) {
      client.disconnect();
      await queues.close();
    }
  }
}

/**
 * Every run of an audit as one status read: run states and job fields in one transaction (a
 * consistent snapshot of the queue), then one pipelined lock check for the active runs. Redis work is
 * linear in the audit's runs and the queue's list lengths, with a fixed number of round trips:
 * `Job.getState` per run (a script that scans the wait list with LPOS) made one status call cost
 * O(runs x waiting runs) of single-threaded Redis time, shared with the workers renewing their locks.
 * What crosses the wire and what the client parses is O(runs a worker has touched): a run still as
 * submitted comes back as one small integer (see JOB_READ).
 */
async function readRuns(
  client: Redis,
  runsQueue: Queue<RunJobData, RunReturn>,
  list: AuditJobData['runs'],
  cancelledRuns: Record<string, string>,
): Promise<RunStatus[]> {
  const ids = [...new Set(list.map((r) => r.run_id))];
  let snapshot: Map<string, RunSnapshot>;
  try {
    snapshot = await readRunSnapshot(client, runsQueue, ids, true);
  } catch (error) {
    // ZMSCORE came with Redis 6.2; an older server gets one ZSCORE per run and set.
    if (!/unknown command|EXECABORT/i.test(String((error as Error)?.message))) throw error;
    snapshot = await readRunSnapshot(client, runsQueue, ids, false);
  }
  const runs = list.map(({ run_id, cell_id }): RunStatus => {
    const found = snapshot.get(run_id);
    if (!found?.job) return emptyRun(run_id, cell_id, cancelledRuns[run_id] !== undefined ? 'cancelled' : 'unknown');
    const run = runStatus(found.job, runStateOf(found.state), cell_id);
    // An untouched run shares one parsed job with the others of the same options: its id is its own.
    if (found.untouched) run.run_id = run_id;
    return run;
  });
  const active = runs.filter((r) => r.state === 'active');
  if (active.length > 0) {
    const pipe = client.pipeline();
    for (const run of active) pipe.exists(`${runsQueue.toKey(run.run_id)}:lock`);
    const locks = (await pipe.exec()) ?? [];
    active.forEach((run, i) => {
      const [err, n] = locks[i] ?? [null, 0];
      if (err) throw err;
      run.worker_alive = n === 1;
    });
  }
  return runs;
}

/** The job-hash fields a run's status needs: not its data, logs or stack traces. */
const JOB_FIELDS = [
  'name',
  'timestamp',
  'opts',
  'atm',
  'attemptsMade',
  'progress',
  'failedReason',
  'returnvalue',
  'processedOn',
  'finishedOn',
] as const;

/**
 * The job fields of a chunk of runs, read inside Redis: ARGV[1] the job key prefix, ARGV[2..] run
 * ids. Per run: 0 when it has no job hash; JOB_FIELDS' values (an array) once a worker has touched
 * it (started, progress, a failure, a result, an attempt counted); for a run still as submitted, only
 * its options, as 1 when they are those of the previous untouched run (every run of one submit has
 * the same). So 10,000 waiting runs come back as 10,000 small integers, not 100,000 strings for the
 * client to parse into jobs: the client's work follows the runs that changed, not the runs there are.
 */
const JOB_READ = `
local fields = {${JOB_FIELDS.map((f) => `'${f}'`).join(', ')}}
local out = {}
local last = nil
for i = 2, #ARGV do
  local v = redis.call('HMGET', ARGV[1] .. ARGV[i], unpack(fields))
  if not v[1] and not v[2] and not v[3] then
    out[#out + 1] = 0
  elseif (v[4] and v[4] ~= '0') or (v[5] and v[5] ~= '0') or v[6] or v[7] or v[8] or v[9] or v[10] then
    out[#out + 1] = v
  elseif v[3] == last then
    out[#out + 1] = 1
  else
    last = v[3]
    out[#out + 1] = v
  end
end
return out
`;
/** BullMQ's sets and lists, in the order its getState script tests them. */
const STATE_SETS = ['completed', 'failed', 'delayed', 'prioritized'] as const;
const STATE_LISTS = [
  ['active', 'active'],
  ['wait', 'waiting'],
  ['paused', 'waiting'],
] as const;
/** Runs per ZMSCORE and per job-read script: each a few milliseconds of Redis at most. */
const SCORE_CHUNK = 1_000;

interface RunSnapshot {
  state: string;
  job: Job<RunJobData, RunReturn> | null;
  /** The job is the shared one of untouched runs with these options (its id is not this run's). */
  untouched: boolean;
}

async function readRunSnapshot(
  client: Redis,
  runsQueue: Queue<RunJobData, RunReturn>,
  ids: string[],
  multiScore: boolean,
): Promise<Map<string, RunSnapshot>> {
  const keys = runsQueue.keys;
  const tx = client.multi();
  const sets = [...STATE_SETS, 'waiting-children'] as const;
  for (const set of sets) {
    if (multiScore)
      for (let i = 0; i < ids.length; i += SCORE_CHUNK)
        tx.zmscore(keys[set] as string, ...ids.slice(i, i + SCORE_CHUNK));
    else for (const id of ids) tx.zscore(keys[set] as string, id);
  }
  for (const [list] of STATE_LISTS) tx.lrange(keys[list] as string, 0, -1);
  const jobPrefix = runsQueue.toKey('');
  for (let i = 0; i < ids.length; i += SCORE_CHUNK) tx.eval(JOB_READ, 0, jobPrefix, ...ids.slice(i, i + SCORE_CHUNK));
  const replies = (await tx.exec()) ?? [];
  let at = 0;
  const next = (): unknown => {
    const [err, value] = replies[at++] ?? [new Error('status read: a reply is missing'), null];
    if (err) throw err;
    return value;
  };
  const inSet = new Map<string, Set<string>>();
  for (const set of sets) {
    const members = new Set<string>();
    if (multiScore) {
      for (let i = 0; i < ids.length; i += SCORE_CHUNK) {
        (next() as (string | null)[]).forEach((score, j) => {
          if (score !== null) members.add(ids[i + j] as string);
        });
      }
    } else {
      for (const id of ids) if (next() !== null) members.add(id);
    }
    inSet.set(set, members);
  }
  const inList = STATE_LISTS.map(([, state]) => ({ state, members: new Set(next() as string[]) }));
  const jobOf = (values: (string | null)[], id: string) => {
    const raw: Record<string, string> = {};
    JOB_FIELDS.forEach((field, i) => {
      const v = values[i];
      if (v !== null && v !== undefined) raw[field] = v;
    });
    return Job.fromJSON(runsQueue, raw as unknown as JobJsonRaw, id) as Job<RunJobData, RunReturn>;
  };
  const out = new Map<string, RunSnapshot>();
  let shared: Job<RunJobData, RunReturn> | null = null;
  let chunk: (number | (string | null)[])[] = [];
  ids.forEach((id, k) => {
    if (k % SCORE_CHUNK === 0) {
      chunk = next() as typeof chunk;
      shared = null; // the script compares options within its own chunk only
    }
    const reply = chunk[k % SCORE_CHUNK];
    let job: Job<RunJobData, RunReturn> | null = null;
    let untouched = false;
    if (Array.isArray(reply)) {
      job = jobOf(reply, id);
      untouched = job.attemptsMade === 0 && !job.processedOn && !job.finishedOn && !job.failedReason;
      untouched &&= reply[5] === null && reply[7] === null;
      if (untouched) shared = job;
    } else if (reply === 1) {
      job = shared;
      untouched = true;
    }
    let state = STATE_SETS.find((set) => inSet.get(set)?.has(id)) as string | undefined;
    state ??= inList.find((l) => l.members.has(id))?.state;
    if (state === undefined && inSet.get('waiting-children')?.has(id)) state = 'waiting-children';
    out.set(id, { state: state ?? 'unknown', job, untouched });
  });
  return out;
}

function emptyRun(runId: string, cellId: string, state: RunState): RunStatus {
  return {
    run_id: runId,
    cell_id: cellId,
    state,
    attempts_made: 0,
    max_attempts: 0,
    progress: null,
    failure: null,
    result: null,
    started: null,
    finished: null,
  };
}

function runStatus(job: Job<RunJobData, RunReturn>, state: RunState, cellId: string): RunStatus {
  const progress = isRunProgress(job.progress) ? job.progress : null;
  // A completed run has no failure, whatever an earlier (killed or crashed) attempt left in failedReason.
  const failure =
    state !== 'completed' && (state === 'failed' || state === 'delayed' || job.attemptsMade > 0)
      ? job.failedReason || null
      : null;
  return {
    run_id: job.id ?? job.data.run_id,
    cell_id: cellId,
    // A run whose cancel arrived while it ran fails with kind `cancelled`: show it as such.
    state: state === 'failed' && /^cancelled: /.test(job.failedReason ?? '') ? 'cancelled' : state,
    attempts_made: job.attemptsMade,
    max_attempts: job.opts.attempts ?? 1,
    progress,
    failure,
    result: state === 'completed' ? (job.returnvalue?.result ?? null) : null,
    started: job.processedOn ? new Date(job.processedOn).toISOString() : null,
    finished: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}

function isRunProgress(value: unknown): value is RunProgress {
  return typeof value === 'object' && value !== null && 'phase' in value && 'host' in value;
}

/** True when the audit needs no more work (finished or cancelled). */
export function auditDone(status: AuditStatus): boolean {
  return status.state === 'finished' || status.state === 'cancelled';
}

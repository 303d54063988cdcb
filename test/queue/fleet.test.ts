import { describe, expect, it } from 'vitest';
import { auditEta, cellColumns, describeSlurmJob, parseCellId, parseNvidiaSmi, renderFleet, slurmJobInfo, varyingCellAxes, type AuditStatus, type RunStatus, type WorkerStatus } from '../../src/queue/index.js';

const run = (over: Partial<RunStatus>): RunStatus => ({
  run_id: 'run-1', cell_id: 'dose=1', state: 'waiting', attempts_made: 0, max_attempts: 3, progress: null, failure: null, result: null, started: null, finished: null, ...over,
});
const audit = (runs: RunStatus[]): AuditStatus => ({ audit_id: 'a', name: 'n', state: 'running', submitted: '', cancelled_at: null, counts: {}, runs, summary: null });
const progress = (eta: number | null) => ({ host: 'h', gpu: '0', worker_pid: 1, attempt: 1, phase: 'training' as const, trainer_pid: 2, device: 'cuda', update: 10, total: 100, loss: 1, rows_per_s: 5, eta_s: eta, resumed_from: null, last_checkpoint: null, eval: null, updated: 0 });

describe('fleet helpers', () => {
  it('reads nvidia-smi CSV, unknown fields as null', () => {
    expect(parseNvidiaSmi('0, NVIDIA H100 80GB HBM3, 97, 61234, 81559\n1, NVIDIA H100 80GB HBM3, [N/A], 3, 81559\n')).toEqual([
      { index: '0', name: 'NVIDIA H100 80GB HBM3', util: 97, mem_used_mib: 61234, mem_total_mib: 81559 },
      { index: '1', name: 'NVIDIA H100 80GB HBM3', util: null, mem_used_mib: 3, mem_total_mib: 81559 },
    ]);
  });

  it('splits cell ids into axis columns, values with commas kept whole', () => {
    expect(parseCellId('visibility=encoded:binary,dose=8,placement=fractions 0.1,0.5')).toEqual({ visibility: 'encoded:binary', dose: '8', placement: 'fractions 0.1,0.5' });
    expect(varyingCellAxes(['a=1,b=x', 'a=2,b=x'])).toEqual(['a']);
    const cols = cellColumns(['visibility=visible,dose=1', 'visibility=visible,dose=16']);
    expect(cols.header.trim()).toBe('dose');
    expect(cols.row('visibility=visible,dose=16').trim()).toBe('16');
  });

  it('estimates the audit ETA from finished runs, active runs and the waiting ones', () => {
    const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
    const finished = run({ run_id: 'f', state: 'completed', started: t(0), finished: t(100) });
    // One active run with 50 s left, two waiting runs of 100 s each, over 2 slots: (50 + 200) / 2.
    expect(auditEta(audit([finished, run({ state: 'active', progress: progress(50) }), run({}), run({})]), Date.now(), 2)).toBe(125);
    // Nothing started: unknown.
    expect(auditEta(audit([run({}), run({})]))).toBeNull();
    // The longest active run bounds it from below.
    expect(auditEta(audit([finished, run({ state: 'active', progress: progress(500) })]), Date.now(), 4)).toBe(500);
  });

  it('prints workers with state, slots and GPUs, and rows/s per host', () => {
    const w = (over: Partial<WorkerStatus>): WorkerStatus => ({
      worker_id: 'gpu1:10', host: 'gpu1', pid: 10, started: '', beat: 0, interval_ms: 5000, runner: 'local', state: 'busy', age_s: 2,
      slots: [{ index: 0, gpu: '0', run_id: 'run-a', audit_id: 'a' }, { index: 1, gpu: '1', run_id: null, audit_id: null }],
      gpus: [{ index: '0', name: 'H100', util: 97, mem_used_mib: 100, mem_total_mib: 200 }], ...over,
    });
    const text = renderFleet([w({}), w({ worker_id: 'gpu2:11', host: 'gpu2', pid: 11, state: 'lost', age_s: 90, slots: [], gpus: [] })], new Map([['gpu1', 12.5]]));
    expect(text).toMatch(/gpu1 +10 +busy +2s +gpu0:run-a gpu1:idle +\[gpu0 97% 100\/200 MiB\]/);
    expect(text).toMatch(/gpu2 +11 +lost +1m30s/);
    expect(text).toContain('gpu1: 1 busy, 0 idle, 0 lost; 12.5 rows/s');
    expect(renderFleet([], new Map())).toMatch(/^no workers/);
    // A worker inside a Slurm job says which job and node.
    const slurm = slurmJobInfo({ SLURM_JOB_ID: '1240', SLURM_ARRAY_JOB_ID: '1234', SLURM_ARRAY_TASK_ID: '5', SLURMD_NODENAME: 'node07' });
    expect(slurm).toEqual({ job_id: '1240', array_job_id: '1234', array_task_id: '5', node: 'node07' });
    expect(renderFleet([w({ slurm: slurm! })], new Map())).toMatch(/gpu1 +10 +busy .*  slurm 1234_5 \(job 1240\) on node07\n/);
    expect(describeSlurmJob({ job_id: '77', array_job_id: null, array_task_id: null, node: null })).toBe('slurm 77');
    expect(slurmJobInfo({})).toBeNull();
  });
});

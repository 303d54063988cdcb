import { describe, expect, it } from 'vitest';
import {
  cellColumns,
  describeSlurmJob,
  parseCellId,
  parseNvidiaSmi,
  slurmJobInfo,
  varyingCellAxes,
  type WorkerStatus,
} from '../../src/queue/index.js';
import { renderFleet } from '../../src/cli/views/index.js';

describe('fleet helpers', () => {
  it('reads nvidia-smi CSV, unknown fields as null', () => {
    expect(
      parseNvidiaSmi('0, NVIDIA H100 80GB HBM3, 97, 61234, 81559\n1, NVIDIA H100 80GB HBM3, [N/A], 3, 81559\n'),
    ).toEqual([
      { index: '0', name: 'NVIDIA H100 80GB HBM3', util: 97, mem_used_mib: 61234, mem_total_mib: 81559 },
      { index: '1', name: 'NVIDIA H100 80GB HBM3', util: null, mem_used_mib: 3, mem_total_mib: 81559 },
    ]);
  });

  it('splits cell ids into axis columns, values with commas kept whole', () => {
    expect(parseCellId('visibility=encoded:binary,dose=8,placement=fractions 0.1,0.5')).toEqual({
      visibility: 'encoded:binary',
      dose: '8',
      placement: 'fractions 0.1,0.5',
    });
    expect(varyingCellAxes(['a=1,b=x', 'a=2,b=x'])).toEqual(['a']);
    const cols = cellColumns(['visibility=visible,dose=1', 'visibility=visible,dose=16']);
    expect(cols.header.trim()).toBe('dose');
    expect(cols.row('visibility=visible,dose=16').trim()).toBe('16');
  });

  it('prints workers with state, slots and GPUs, and rows/s per host', () => {
    const w = (over: Partial<WorkerStatus>): WorkerStatus => ({
      worker_id: 'gpu1:10',
      host: 'gpu1',
      pid: 10,
      started: '',
      beat: 0,
      interval_ms: 5000,
      runner: 'local',
      state: 'busy',
      age_s: 2,
      slots: [
        { index: 0, gpu: '0', run_id: 'run-a', audit_id: 'a' },
        { index: 1, gpu: '1', run_id: null, audit_id: null },
      ],
      gpus: [{ index: '0', name: 'H100', util: 97, mem_used_mib: 100, mem_total_mib: 200 }],
      ...over,
    });
    const text = renderFleet(
      [w({}), w({ worker_id: 'gpu2:11', host: 'gpu2', pid: 11, state: 'lost', age_s: 90, slots: [], gpus: [] })],
      new Map([['gpu1', 12.5]]),
    );
    expect(text).toMatch(/gpu1 +10 +busy +2s +gpu0:run-a gpu1:idle +\[gpu0 97% 100\/200 MiB\]/);
    expect(text).toMatch(/gpu2 +11 +lost +1m30s/);
    expect(text).toContain('gpu1: 1 busy, 0 idle, 0 lost; 12.5 rows/s');
    expect(renderFleet([], new Map())).toMatch(/^no workers/);
    // A worker inside a Slurm job says which job and node.
    const slurm = slurmJobInfo({
      SLURM_JOB_ID: '1240',
      SLURM_ARRAY_JOB_ID: '1234',
      SLURM_ARRAY_TASK_ID: '5',
      SLURMD_NODENAME: 'node07',
    });
    expect(slurm).toEqual({ job_id: '1240', array_job_id: '1234', array_task_id: '5', node: 'node07' });
    expect(renderFleet([w({ slurm: slurm! })], new Map())).toMatch(
      /gpu1 +10 +busy .* {2}slurm 1234_5 \(job 1240\) on node07\n/,
    );
    expect(describeSlurmJob({ job_id: '77', array_job_id: null, array_task_id: null, node: null })).toBe('slurm 77');
    expect(slurmJobInfo({})).toBeNull();
  });
});

import { describeSlurmJob, type StoppedWorker, type WorkerStatus } from '../../queue/fleet.js';
import { formatDuration } from './status-format.js';

/**
 * `status --workers`: the fleet in a terminal. One line per worker process (host, pid, state,
 * heartbeat age, what each slot runs, GPU utilisation and memory), then rows/s per host.
 */
export function renderFleet(
  workers: WorkerStatus[],
  throughput: Map<string, number>,
  stopped: StoppedWorker[] = [],
  now: number = Date.now(),
): string {
  if (workers.length === 0) {
    const last = stopped[0];
    if (last) {
      const ago = formatDuration(Math.max(0, (now - last.stopped) / 1000));
      return `no workers running: ${stopped.length === 1 ? 'the last one' : `${stopped.length} worker(s)`} stopped cleanly (the latest ${last.worker_id}, ${ago} ago); start one with \`canary-audit worker\`\n`;
    }
    return 'no workers: none has sent a heartbeat in the last day (start one with `canary-audit worker`)\n';
  }
  const lines: string[] = [];
  const hostWidth = Math.max(4, ...workers.map((w) => w.host.length));
  lines.push(`${'host'.padEnd(hostWidth)}  ${'pid'.padStart(7)}  ${'state'.padEnd(5)}  ${'beat'.padStart(6)}  slots`);
  for (const w of workers) {
    const slots = w.slots
      .map((s) => `${s.gpu === null ? `cpu${s.index}` : `gpu${s.gpu}`}:${s.run_id ?? 'idle'}`)
      .join(' ');
    const gpus = w.gpus
      .map((g) => `gpu${g.index} ${g.util ?? '?'}% ${g.mem_used_mib ?? '?'}/${g.mem_total_mib ?? '?'} MiB`)
      .join(', ');
    lines.push(
      `${w.host.padEnd(hostWidth)}  ${String(w.pid).padStart(7)}  ${w.state.padEnd(5)}  ${formatDuration(w.age_s).padStart(6)}  ${slots}${gpus ? `  [${gpus}]` : ''}${w.slurm ? `  ${describeSlurmJob(w.slurm)}` : ''}`,
    );
  }
  const hosts = [...new Set(workers.map((w) => w.host))].sort();
  lines.push('');
  for (const host of hosts) {
    const mine = workers.filter((w) => w.host === host);
    const count = (s: string) => mine.filter((w) => w.state === s).length;
    lines.push(
      `${host}: ${count('busy')} busy, ${count('idle')} idle, ${count('lost')} lost; ${(throughput.get(host) ?? 0).toFixed(1)} rows/s`,
    );
  }
  return `${lines.join('\n')}\n`;
}

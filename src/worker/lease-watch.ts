import type { Worker } from 'bullmq';

/**
 * Whether this worker still holds the lock of each job it runs. BullMQ renews job locks every
 * lockMs/2 and says so ('locksRenewed'); a renewal refused by Redis ('lockRenewalFailed') means
 * another worker may own the run already. When Redis is unreachable, nothing is said at all: the
 * lock then expires lockMs after its last renewal, and from that moment another worker may take
 * the run as stalled. A run whose lease is lost must stop its trainer (which checkpoints), so two
 * trainers never train one run and the taker resumes where this one stopped.
 */
export class LeaseWatch {
  private readonly confirmed = new Map<string, number>();
  private readonly refused = new Set<string>();

  constructor(
    private readonly lockMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Follow a BullMQ worker's lock renewals. */
  attach(worker: Worker): void {
    worker.on('locksRenewed', ({ jobIds }: { jobIds: string[] }) => {
      const at = this.now();
      for (const id of jobIds) if (this.confirmed.has(id)) this.confirmed.set(id, at);
    });
    worker.on('lockRenewalFailed', (jobIds: string[]) => {
      for (const id of jobIds) if (this.confirmed.has(id)) this.refused.add(id);
    });
  }

  /** A job was fetched: its lock was just taken. */
  begin(jobId: string): void {
    this.confirmed.set(jobId, this.now());
    this.refused.delete(jobId);
  }

  end(jobId: string): void {
    this.confirmed.delete(jobId);
    this.refused.delete(jobId);
  }

  /** Why this worker may no longer own the job, or null while its lock is known to be alive. */
  lost(jobId: string): string | null {
    if (this.refused.has(jobId)) return 'Redis refused to renew the job lock (another worker may own the run)';
    const at = this.confirmed.get(jobId);
    if (at === undefined) return null;
    const age = this.now() - at;
    if (age < this.lockMs) return null;
    return `no lock renewal for ${(age / 1000).toFixed(1)} s (lock ${(this.lockMs / 1000).toFixed(1)} s): Redis unreachable?`;
  }
}

import { log } from '../log.js';
import {
  assertRedisReachable,
  auditDone,
  collectStatus,
  extendAudit,
  queueConnection,
  submitAudit,
  type AuditStatus,
  type QueueTuning,
  type RedisTarget,
} from '../queue/index.js';
import { WorkerPool, type WorkerSlot } from '../worker/index.js';
import { CONTROL_WARNING_KINDS, writeReport, type ComparisonVerdict } from '../report/index.js';
import { trackVerdicts, type TrainerRunner } from '../runner/index.js';
import type { AuditSource } from './audit-source.js';
import { EmbeddedRedisKeeper } from './redis-keeper.js';
import { sleep } from '../sleep.js';
import { redisDirOf } from '../layout.js';
import { runLooks, sequentialOfAudit } from './sequential-audit.js';

/**
 * One audit on one machine (`canary-audit run`): a private redis-server in <audit>/redis/ unless a
 * Redis is given, in-process workers, the flow submitted, progress shown until every run is done,
 * then the report. Interrupted (SIGINT/SIGTERM), the trainers checkpoint, the queue is saved in the
 * append-only file, and running the same command again continues where it stopped.
 */
export interface LocalAuditOptions {
  source: AuditSource;
  /** An existing Redis (REDIS_URL/--redis); default: a private redis-server. */
  target?: RedisTarget;
  slots: WorkerSlot[];
  runner: TrainerRunner;
  tuning: QueueTuning;
  /** Where progress is drawn (bars, change lines, or log records); null for none. */
  view: { show(snapshot: AuditStatus[]): void } | null;
  /** Write the report when the audit is done. Default true. */
  report?: boolean;
  /** Aborting stops the audit early (trainers checkpoint; runs stay queued). */
  signal?: AbortSignal;
  /** ms between progress refreshes. Default 1000. */
  refreshMs?: number;
  /** Sequential replicates: one line per look read (`look 2: seed 4 of ≤10 — …`). */
  onLook?: (line: string) => void;
}

export interface LocalAuditResult {
  auditId: string;
  auditDir: string;
  status: AuditStatus | null;
  reportFiles: string[] | null;
  /** The report's headline finding (null without a report or without focal canaries). */
  headline: string | null;
  /** The report's controls that failed (weights_unchanged, null_broken, …): `run` prints them last. */
  controlWarnings: { kind: string; message: string }[];
  /** One plain sentence per declared comparison with its verdict (empty without a report). */
  verdicts: string[];
  /** The same verdicts as fields (summary.json's `verdicts`; empty without a report). */
  comparisons: ComparisonVerdict[];
  interrupted: boolean;
  redis: string;
}

export async function runAuditLocally(options: LocalAuditOptions): Promise<LocalAuditResult> {
  const { source } = options;
  const auditDir = source.input.auditDir;
  let embedded: EmbeddedRedisKeeper | null = null;
  if (options.target) await assertRedisReachable(options.target);
  const target = options.target ?? (embedded = await EmbeddedRedisKeeper.start(redisDirOf(auditDir))).server;
  log.info({ redis: target.redacted, embedded: embedded !== null }, 'queue ready');
  let pool: WorkerPool | null = null;
  try {
    const conn = queueConnection(target);
    // Sequential replicates: the looks submit their runs as they take them (app/sequential-audit.ts).
    const sequential = await sequentialOfAudit(auditDir);
    if (!sequential) await submitAudit(conn, source.artifactsDir, source.input, options.tuning);
    pool = await WorkerPool.start({
      conn,
      artifactsDir: source.artifactsDir,
      runner: options.runner,
      slots: options.slots,
      tuning: options.tuning,
    });
    let status: AuditStatus | null = null;
    const refreshMs = options.refreshMs ?? 1_000;
    const waitDone = async (): Promise<boolean> => {
      status = null;
      while (!options.signal?.aborted) {
        status = (await collectStatus(conn, source.input.auditId))[0] ?? null;
        if (status) options.view?.show([status]);
        if (status && auditDone(status)) break;
        await sleep(refreshMs, options.signal);
      }
      const s = status as AuditStatus | null;
      return s !== null && auditDone(s) && s.state !== 'cancelled';
    };
    if (sequential) {
      await runLooks(auditDir, source.input, sequential, {
        queue: async (runs, progress) => {
          await extendAudit(conn, source.artifactsDir, { ...source.input, runs }, options.tuning, progress);
        },
        wait: waitDone,
        say: (line) => options.onLook?.(line),
      });
      status = (await collectStatus(conn, source.input.auditId))[0] ?? status;
    } else await waitDone();
    const finalStatus = status as AuditStatus | null;
    const interrupted = Boolean(options.signal?.aborted) && !(finalStatus && auditDone(finalStatus));
    await pool.shutdown();
    pool = null;
    let reportFiles: string[] | null = null;
    let headline: string | null = null;
    let controlWarnings: LocalAuditResult['controlWarnings'] = [];
    let verdicts: string[] = [];
    let comparisons: ComparisonVerdict[] = [];
    if (!interrupted && options.report !== false) {
      const written = await writeReport({ auditDir });
      ({ files: reportFiles, headline, verdicts, comparisons } = written);
      // The verdicts beside the runs' curves in TensorBoard (and W&B when the audit asks); best effort.
      if (written.summaryPath !== undefined && verdicts.length > 0)
        for (const warning of (await trackVerdicts(written.summaryPath, auditDir)).warnings) log.warn(warning);
      controlWarnings = written.warnings
        .filter((w) => (CONTROL_WARNING_KINDS as readonly string[]).includes(w.kind))
        .map((w) => ({ kind: w.kind, message: w.message }));
    }
    return {
      auditId: source.input.auditId,
      auditDir,
      status: finalStatus,
      reportFiles,
      headline,
      controlWarnings,
      verdicts,
      comparisons,
      interrupted,
      redis: target.redacted,
    };
  } finally {
    await pool?.shutdown();
    await embedded?.stop();
  }
}

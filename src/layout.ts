import { basename, dirname, join, resolve } from 'node:path';

/**
 * The artifact layout, in one place. Under an artifact root:
 *
 *   <root>/audits/<audit_id>/audit.json          the audit index (src/contracts/audit.ts)
 *   <root>/audits/<audit_id>/grid.yaml           the grid as planned
 *   <root>/audits/<audit_id>/redis/              the embedded redis-server of `run`
 *   <root>/audits/<audit_id>/runs/<run_id>/manifest.json, rows.jsonl, utility.jsonl
 *   <root>/audits/<audit_id>/runs/<run_id>/output/   what the trainer writes (result.json, failure.json, ...)
 *   <root>/audits/<audit_id>/report/             the report's default folder
 *   <root>/cache/                                the trainer's cache of pretrained tiny bases
 *
 * Every reader and writer of these paths goes through this module; a folder's place in the layout
 * (which root an audit or run folder belongs to) is parsed back only here.
 */
export const AUDITS_DIR = 'audits';
export const AUDIT_INDEX_FILE = 'audit.json';
export const GRID_FILE = 'grid.yaml';
export const REDIS_DIR = 'redis';
export const RUNS_DIR = 'runs';
export const MANIFEST_FILE = 'manifest.json';
/** A run's images (image tasks): `images/<sha256>.png`, beside the rows. */
export const IMAGES_DIR = 'images';
export const OUTPUT_DIR = 'output';
export const RESULT_FILE = 'result.json';
export const FAILURE_FILE = 'failure.json';
export const REPORT_DIR = 'report';
export const CACHE_DIR = 'cache';

/** <root>/audits */
export const auditsRoot = (artifactsDir: string): string => join(artifactsDir, AUDITS_DIR);
/** <root>/audits/<audit_id> */
export const auditDirOf = (artifactsDir: string, auditId: string): string => join(artifactsDir, AUDITS_DIR, auditId);
/** <audit>/audit.json */
export const auditIndexPath = (auditDir: string): string => join(auditDir, AUDIT_INDEX_FILE);
/** <audit>/report */
export const reportDirOf = (auditDir: string): string => join(auditDir, REPORT_DIR);
/** <audit>/redis */
export const redisDirOf = (auditDir: string): string => join(auditDir, REDIS_DIR);
/** A run folder relative to its audit folder, POSIX separators: what audit.json's `dir` holds. */
export const runDirEntry = (runId: string): string => `${RUNS_DIR}/${runId}`;
/** <audit>/runs/<run_id> */
export const runDirOf = (auditDir: string, runId: string): string => join(auditDir, RUNS_DIR, runId);
/** <run>/manifest.json */
export const manifestPathOf = (runDir: string): string => join(runDir, MANIFEST_FILE);
/** <run>/output: the trainer's folder. */
export const outputDirOf = (runDir: string): string => join(runDir, OUTPUT_DIR);
/** <run>/output from the run's manifest.json. */
export const outputDirOfManifest = (manifestPath: string): string => outputDirOf(dirname(manifestPath));
/** <root>/cache */
export const cacheDirOf = (artifactsDir: string): string => join(artifactsDir, CACHE_DIR);

/** The artifact root holding an audit folder (<root>/audits/<audit_id>), or null outside the layout. */
export function artifactsRootOfAudit(auditDir: string): string | null {
  const audits = dirname(resolve(auditDir));
  return basename(audits) === AUDITS_DIR ? dirname(audits) : null;
}

/** The artifact root holding a run folder (<root>/audits/<audit_id>/runs/<run_id>), or null outside the layout. */
export function artifactsRootOfRun(runDir: string): string | null {
  const runs = dirname(resolve(runDir));
  return basename(runs) === RUNS_DIR ? artifactsRootOfAudit(dirname(runs)) : null;
}

import { existsSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { readAuditIndex } from '../contracts/index.js';
import { UserInputError, quoteValue } from '../errors.js';
import { planAudit, writeAudit } from '../manifest/index.js';
import { refuseLongRows } from './row-lengths.js';
import { taskDataLoader } from './task-data.js';
import type { SubmitAuditInput } from '../queue/index.js';
import { pinIfAsked, type ModelRevisions, type PinChoice } from './pinning.js';
import { artifactsRootOfAudit, AUDIT_INDEX_FILE, auditIndexPath, manifestPathOf } from '../layout.js';

/**
 * What `submit` and `run` accept: a grid file (expanded and written into the artifact root, the way
 * `plan --out` does) or an audit folder already written there (a folder with audit.json, or that
 * file). Either way the result is the audit's folder and its run manifests, all inside the root.
 */
export interface AuditSource {
  input: SubmitAuditInput;
  artifactsDir: string;
  /** True when the grid was expanded now (false: an existing audit folder was read). */
  planned: boolean;
  /** How the grid's Hub models were pinned (planned now only). */
  models?: ModelRevisions;
}

export async function loadAuditSource(arg: string, artifactsDir: string, pinning: PinChoice = {}): Promise<AuditSource> {
  const path = resolve(arg);
  if (!existsSync(path)) {
    throw new UserInputError(`${quoteValue(arg)} does not exist; pass a grid YAML file or an audit folder (with audit.json)`, {
      field: 'GRID',
      code: 'E_NO_FILE',
    });
  }
  const isDir = statSync(path).isDirectory();
  if (isDir || basename(path) === AUDIT_INDEX_FILE) {
    const indexFile = isDir ? auditIndexPath(path) : path;
    if (!existsSync(indexFile)) {
      throw new UserInputError(`${path} is a folder without audit.json; pass a grid YAML file or an audit folder written by \`canary-audit plan --out\``, {
        field: 'GRID',
        code: 'E_NO_FILE',
      });
    }
    return readAuditFolder(indexFile);
  }
  return planGrid(path, artifactsDir, pinning);
}

async function readAuditFolder(indexFile: string): Promise<AuditSource> {
  const auditDir = dirname(indexFile);
  const index = await readAuditIndex(indexFile);
  // Job data names paths relative to the artifact root: <root>/audits/<audit_id>.
  const artifactsDir = artifactsRootOfAudit(auditDir);
  if (artifactsDir === null) {
    throw new UserInputError(
      `${auditDir} is not inside an artifact root (expected <root>/audits/<audit_id>); write audits with \`canary-audit plan --out\` or pass the grid`,
      { code: 'E_BAD_AUDIT' },
    );
  }
  const runs = index.runs.map((run, i) => {
    const manifestPath = manifestPathOf(join(auditDir, run.dir));
    if (!existsSync(manifestPath)) {
      throw new UserInputError(`${indexFile}: runs[${i}] (${run.run_id}) has no ${manifestPath}; write the audit again`, {
        field: `runs[${i}].dir`,
        code: 'E_BAD_AUDIT',
      });
    }
    return { runId: run.run_id, cellId: run.cell_id, manifestPath };
  });
  return {
    input: { auditId: index.id, name: index.name, auditDir, runs },
    artifactsDir,
    planned: false,
  };
}

async function planGrid(gridPath: string, artifactsDir: string, pinning: PinChoice): Promise<AuditSource> {
  const { plan, models } = await pinIfAsked(await planAudit(gridPath, { artifactsDir, loadTaskData: taskDataLoader(gridPath, pinning.hub) }), pinning);
  await refuseLongRows(plan);
  const written = await writeAudit(plan, artifactsDir);
  return {
    input: {
      auditId: written.auditId,
      name: written.name,
      auditDir: written.auditDir,
      runs: written.runs.map((r) => ({ runId: r.runId, cellId: r.cellId, manifestPath: r.manifestPath })),
    },
    artifactsDir,
    planned: true,
    models,
  };
}

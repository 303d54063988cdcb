import { existsSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { readAuditIndex } from '../contracts/index.js';
import { MAX_JSON_BYTES } from '../fs/json-file.js';
import { readInsideSync } from '../fs/read-boundary.js';
import { UserInputError, quoteValue } from '../errors.js';
import type { SubmitAuditInput } from '../queue/index.js';
import type { ModelRevisions, PinChoice } from './pinning.js';
import { planGrid } from './plan.js';
import { trackingWith, writeTracking, type TrackingSettings } from '../manifest/index.js';
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

export async function loadAuditSource(
  arg: string,
  artifactsDir: string,
  pinning: PinChoice = {},
  tracking: TrackingChoice = {},
): Promise<AuditSource> {
  const source = await findAuditSource(arg, artifactsDir, pinning);
  // --wandb PROJECT: the audit's runs report to that W&B project (tracking.json, read by the trainer).
  if (tracking.wandbProject !== undefined)
    await writeTracking(source.input.auditDir, trackingWith(source.gridTracking, tracking.wandbProject));
  return source;
}

/** What a command asks of tracking beyond the grid's `tracking:` block. */
export interface TrackingChoice {
  /** W&B project of every run of the audit (the command's --wandb). */
  wandbProject?: string;
}

async function findAuditSource(
  arg: string,
  artifactsDir: string,
  pinning: PinChoice,
): Promise<AuditSource & { gridTracking?: TrackingSettings }> {
  const path = resolve(arg);
  if (!existsSync(path)) {
    throw new UserInputError(
      `${quoteValue(arg)} does not exist; pass a grid YAML file or an audit folder (with audit.json)`,
      {
        field: 'GRID',
        code: 'E_NO_FILE',
      },
    );
  }
  const isDir = statSync(path).isDirectory();
  if (isDir || basename(path) === AUDIT_INDEX_FILE) {
    const indexFile = isDir ? auditIndexPath(path) : path;
    if (!existsSync(indexFile)) {
      throw new UserInputError(
        `${path} is a folder without audit.json; pass a grid YAML file or an audit folder written by \`canary-audit plan --out\``,
        {
          field: 'GRID',
          code: 'E_NO_FILE',
        },
      );
    }
    return readAuditFolder(indexFile);
  }
  return plannedSource(path, artifactsDir, pinning);
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
      throw new UserInputError(
        `${indexFile}: runs[${i}] (${run.run_id}) has no ${manifestPath}; write the audit again`,
        {
          field: `runs[${i}].dir`,
          code: 'E_BAD_AUDIT',
        },
      );
    }
    const gpus = manifestGpus(manifestPath);
    return { runId: run.run_id, cellId: run.cell_id, manifestPath, ...(gpus > 1 ? { gpus } : {}) };
  });
  return {
    input: { auditId: index.id, name: index.name, auditDir, runs },
    artifactsDir,
    planned: false,
  };
}

/** A grid planned (the way `plan --out` does it) and written into the artifact root. */
async function plannedSource(
  gridPath: string,
  artifactsDir: string,
  pinning: PinChoice,
): Promise<AuditSource & { gridTracking?: TrackingSettings }> {
  const { plan, models, written } = await planGrid(gridPath, { ...pinning, out: artifactsDir });
  const gpus = plan.grid.doc.training.gpus ?? 1;
  return {
    input: {
      auditId: written.auditId,
      name: written.name,
      auditDir: written.auditDir,
      // training.gpus is one value for the whole grid.
      runs: written.runs.map((r) => ({
        runId: r.runId,
        cellId: r.cellId,
        manifestPath: r.manifestPath,
        ...(gpus > 1 ? { gpus } : {}),
      })),
    },
    artifactsDir,
    planned: true,
    models,
    ...(plan.grid.doc.tracking ? { gridTracking: plan.grid.doc.tracking } : {}),
  };
}

/** training.gpus of a written manifest (1 when absent or unreadable: the trainer reports a bad manifest). */
function manifestGpus(manifestPath: string): number {
  try {
    const gpus = (
      JSON.parse(
        readInsideSync(dirname(manifestPath), manifestPath, { maxBytes: MAX_JSON_BYTES, what: 'manifest' }).toString(
          'utf8',
        ),
      ) as { training?: { gpus?: unknown } }
    ).training?.gpus;
    return typeof gpus === 'number' && Number.isInteger(gpus) && gpus > 1 ? gpus : 1;
  } catch {
    return 1;
  }
}

import { UserInputError } from '../errors.js';
import { readJsonFile } from '../fs/index.js';
import type { Provenance } from '../provenance/index.js';
import { describeSchemaErrors, validate } from '../schemas/index.js';

/**
 * audit.json (schemas/audit.schema.json): the index of an audit's runs, written by `plan --out`,
 * `submit` and `run` at <artifacts>/audits/<audit_id>/audit.json and read by `submit`, `run` and
 * `report`. One type, one reader; the reader validates against the schema.
 */
export const AUDIT_VERSION = 'canary-audit.audit/1';

/** One run of the audit: its folder is `dir` relative to audit.json's folder. */
export interface AuditRunEntry {
  run_id: string;
  cell_id: string;
  /** Axis labels of the cell; dose and placement are null in a no-canary run. */
  cell: Record<string, unknown>;
  dir: string;
}

export interface AuditIndex {
  schema_version: typeof AUDIT_VERSION;
  id: string;
  name: string;
  description?: string;
  /** Absolute path of the grid file as submitted; grid.yaml beside audit.json is its copy. */
  grid_file: string;
  grid_sha256: string;
  created: string;
  /** Label of every value per axis, in grid order (dose and seed as numbers). */
  axes: Record<string, (string | number)[]>;
  runs: AuditRunEntry[];
  provenance: Provenance;
}

/**
 * Read and validate an audit.json. Any problem is one line naming the file and the first bad field
 * (`runs.0.dir: must match pattern ...`) and how to get a valid file back.
 */
export async function readAuditIndex(path: string): Promise<AuditIndex> {
  const raw = await readJsonFile(path);
  const errors = validate('audit', raw);
  if (errors.length > 0) {
    const lines = describeSchemaErrors(errors);
    const more = lines.length > 1 ? ` (and ${lines.length - 1} more)` : '';
    throw new UserInputError(
      `${lines[0]}${more}; not a valid audit index — write it again with \`canary-audit plan --out\``,
      {
        location: { file: path },
        code: 'E_BAD_AUDIT',
      },
    );
  }
  return raw as AuditIndex;
}

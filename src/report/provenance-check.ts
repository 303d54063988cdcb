import { canonicalJson } from '../hash.js';
import type { Provenance, Stamp } from '../provenance/index.js';

/**
 * Which code produced each run, and the warnings a reader must see before trusting a comparison:
 * runs of one audit produced by different code versions, artifacts whose code changed while they
 * were being produced, and code no commit describes.
 */
export interface StampBrief {
  git_commit: string | null;
  git_dirty: boolean | null;
  code_sha256: string;
  versions: Record<string, string>;
  changed_mid_run: boolean;
}

export interface ReportWarning {
  kind:
    | 'mixed_code_versions'
    | 'changed_mid_run'
    | 'uncommitted_code'
    | 'failed_runs'
    | 'missing_runs'
    | 'no_control'
    | 'mixed_dataset_versions'
    | 'mixed_numerics'
    | 'single_run'
    | 'two_runs'
    | ControlWarningKind;
  message: string;
  runs: string[];
  /** The cells (cell ids) the warning is about, where it names cells. */
  cells?: string[];
}

/** Controls that fail loud (src/report/control-checks.ts): shown first, wherever warnings are shown. */
export const CONTROL_WARNING_KINDS = [
  'weights_unchanged',
  'null_broken',
  'base_cannot_copy',
  'scores_all_tied',
] as const;
export type ControlWarningKind = (typeof CONTROL_WARNING_KINDS)[number];

export interface RunStamps {
  run_id: string;
  controller: Provenance | null;
  trainer: Provenance | null;
}

export function brief(p: Provenance | null): StampBrief | null {
  if (!p) return null;
  const s = p.at_write;
  return {
    git_commit: s.git_commit,
    git_dirty: s.git_dirty,
    code_sha256: s.code_sha256,
    versions: s.versions,
    changed_mid_run: p.changed_mid_run,
  };
}

/** Same key ⇔ same code (time and host ignored), as `stampsDiffer` defines it. */
function codeKey(s: Stamp): string {
  return canonicalJson({ c: s.git_commit, d: s.git_dirty, h: s.code_sha256, v: s.versions });
}

function shortStamp(s: Stamp): string {
  const commit = s.git_commit ? s.git_commit.slice(0, 10) : 'no commit';
  return `${commit}${s.git_dirty ? '+dirty' : ''} code ${s.code_sha256.slice(0, 10)}`;
}

export function provenanceWarnings(runs: readonly RunStamps[]): ReportWarning[] {
  const warnings: ReportWarning[] = [];
  for (const component of ['controller', 'trainer'] as const) {
    const versions = new Map<string, { stamp: Stamp; runs: string[] }>();
    for (const r of runs) {
      const p = r[component];
      if (!p) continue;
      const key = codeKey(p.at_write);
      const entry = versions.get(key);
      if (entry) entry.runs.push(r.run_id);
      else versions.set(key, { stamp: p.at_write, runs: [r.run_id] });
    }
    if (versions.size > 1) {
      const parts = [...versions.values()].map(
        (v) => `${shortStamp(v.stamp)} (${v.runs.length} run${v.runs.length === 1 ? '' : 's'})`,
      );
      warnings.push({
        kind: 'mixed_code_versions',
        message: `runs of this audit were produced by ${versions.size} different ${component} code versions: ${parts.join('; ')}. Differences between cells may come from the code, not the grid.`,
        runs: [...versions.values()].flatMap((v) => v.runs),
      });
    }
    const changed = runs.filter((r) => r[component]?.changed_mid_run).map((r) => r.run_id);
    if (changed.length > 0) {
      warnings.push({
        kind: 'changed_mid_run',
        message: `${changed.length} run(s) have a ${component} stamp that changed between start and write (changed_mid_run): their ${component === 'controller' ? 'manifest' : 'result'} may come from code no commit describes.`,
        runs: changed,
      });
    }
    const uncommitted = runs.filter((r) => {
      const s = r[component]?.at_write;
      return s !== undefined && (s.git_dirty === true || s.git_commit === null);
    });
    if (uncommitted.length > 0) {
      warnings.push({
        kind: 'uncommitted_code',
        message: `${uncommitted.length} run(s) were produced by ${component} code with uncommitted changes or outside a git checkout; only code_sha256 identifies it.`,
        runs: uncommitted.map((r) => r.run_id),
      });
    }
  }
  return warnings;
}

import { artifactError, quoteValue } from '../errors.js';
import { candidateIndex } from '../metrics/candidate-index.js';
import type { CanaryRole } from '../metrics/observation.js';
import { describeSchemaErrors, validate } from '../schemas/index.js';
import type { CandidateSpace, Manifest, ProbeKind, UtilityRef } from '../contracts/manifest.js';
import type { DatasetProvenance } from '../contracts/dataset.js';
import type { Provenance } from '../provenance/index.js';

/**
 * The few facts of a manifest the report needs, extracted once: where each canary's true code and
 * each probe's shown code sit in the score files. Sampled candidate lists (possibly 20,000 codes
 * per canary) are reduced to two indices and dropped, so memory does not grow with decoys.
 */
export interface CanaryInfo {
  id: string;
  code: string;
  role: CanaryRole;
  cohort: string | null;
  dose: number | null;
  visibility: string | null;
  /** Index of the true code in this canary's candidate order. */
  trueIndex: number;
  /** Designs together in one run: the design of this canary's secret (manifest `design`). */
  design?: string;
}

export interface ProbeInfo {
  id: string;
  canary_id: string;
  kind: ProbeKind;
  shown_code: string | null;
  /** Index of the shown code among the canary's candidates; -1 when absent or none shown. */
  shownIndex: number;
}

export interface ManifestInfo {
  path: string;
  run_id: string;
  space: CandidateSpace;
  canaries: Map<string, CanaryInfo>;
  probes: Map<string, ProbeInfo>;
  /** The run inserts no canary: a no-canary control run. */
  no_canary: boolean;
  provenance: Provenance;
  /** The task's name (manifest `task.name`). */
  task: string;
  /** utility.jsonl and what to measure on it (absent: no utility rows). */
  utility: UtilityRef | null;
  /** Where a dataset-backed task's rows came from (manifest `task.dataset`). */
  dataset: DatasetProvenance | null;
  /** `randomized`: each pool canary was inserted by a fair coin (manifest `inclusion`); else `fixed`. */
  inclusion: 'randomized' | 'fixed';
  /** The base fine-tuning starts from, as a key (src/report/design.ts); null: from scratch. */
  base: string | null;
  /** sha256 of rows.jsonl: equal across seeds when the seeds do not vary the rows. */
  rows_sha256: string;
  /** Design sampled-text: codes are placeholders, the texts are in result.json's `sampled_text`. */
  sampled_text?: boolean;
}

export function manifestInfo(path: string, raw: unknown): ManifestInfo {
  const errors = validate('manifest', raw);
  if (errors.length > 0) {
    throw artifactError(
      path,
      'manifest',
      `does not match schemas/manifest.schema.json: ${describeSchemaErrors(errors).slice(0, 3).join('; ')}`,
    );
  }
  const m = raw as Manifest;
  const space = m.candidate_space;
  const expected = space.kind === 'exhaustive' ? [...space.alphabet].length ** space.length : undefined;
  if (expected !== undefined && expected !== space.size) {
    throw artifactError(
      path,
      'candidate_space.size',
      `exhaustive space of ${space.length} characters over ${quoteValue(space.alphabet)} has ${expected} codes, not ${space.size}`,
    );
  }

  const canaries = new Map<string, CanaryInfo>();
  const lists = new Map<string, readonly string[] | undefined>();
  const add = (
    where: string,
    c: { id: string; code: string; candidates?: string[]; design?: string },
    info: Omit<CanaryInfo, 'id' | 'code' | 'trueIndex' | 'design'>,
  ): void => {
    if (canaries.has(c.id))
      throw artifactError(
        path,
        `${where}.id`,
        `canary id ${quoteValue(c.id)} appears twice; ids must be unique per run`,
      );
    if (space.kind === 'sampled' && (!c.candidates || c.candidates.length !== space.size)) {
      throw artifactError(
        path,
        `${where}.candidates`,
        `a sampled space needs ${space.size} candidates per canary, got ${c.candidates?.length ?? 'none'}`,
      );
    }
    const trueIndex = candidateIndex(space, c.code, c.candidates);
    if (trueIndex < 0)
      throw artifactError(path, `${where}.code`, `true code ${quoteValue(c.code)} is not in the candidate space`);
    canaries.set(c.id, { id: c.id, code: c.code, trueIndex, ...info, ...(c.design ? { design: c.design } : {}) });
    lists.set(c.id, c.candidates);
  };
  m.canaries.forEach((c, i) =>
    add(`canaries[${i}]`, c, {
      role: c.cohort === 'focal' ? 'focal' : 'auxiliary',
      cohort: c.cohort,
      dose: c.dose,
      visibility: c.cue.visibility,
    }),
  );
  m.held_out.forEach((c, i) =>
    add(`held_out[${i}]`, c, { role: 'held_out', cohort: null, dose: null, visibility: null }),
  );

  const probes = new Map<string, ProbeInfo>();
  m.probes.forEach((p, i) => {
    const canary = canaries.get(p.canary_id);
    if (!canary)
      throw artifactError(
        path,
        `probes[${i}].canary_id`,
        `${quoteValue(p.canary_id)} is neither an inserted nor a held-out canary of this run`,
      );
    if (probes.has(p.id)) throw artifactError(path, `probes[${i}].id`, `probe id ${quoteValue(p.id)} appears twice`);
    const shown = p.shown_code ?? null;
    probes.set(p.id, {
      id: p.id,
      canary_id: p.canary_id,
      kind: p.kind,
      shown_code: shown,
      shownIndex: shown === null ? -1 : candidateIndex(space, shown, lists.get(p.canary_id)),
    });
  });
  return {
    path,
    run_id: m.run_id,
    space,
    canaries,
    probes,
    no_canary: m.canaries.length === 0,
    provenance: m.provenance,
    task: m.task.name,
    utility: m.utility ?? null,
    dataset: m.task.dataset ?? null,
    inclusion: m.inclusion?.kind === 'randomized' ? 'randomized' : 'fixed',
    base: baseKeyOf(m.model),
    rows_sha256: m.rows.sha256,
    ...(m.sampled_text ? { sampled_text: true } : {}),
  };
}

/** The base a run's fine-tuning starts from, as a key; null when it trains from scratch. */
export function baseKeyOf(model: {
  backend: string;
  name: string;
  revision: string | null;
  init_seed: number;
  tiny?: { pretrain?: { rows: { sha256: string }; init_seed?: number } };
  hf?: { random_init?: boolean };
}): string | null {
  if (model.backend === 'hf') return model.hf?.random_init ? null : `hf:${model.name}@${model.revision ?? ''}`;
  const p = model.tiny?.pretrain;
  return p ? `tiny:${p.rows.sha256}:init${p.init_seed ?? model.init_seed}` : null;
}

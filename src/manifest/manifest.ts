import type {
  CandidateSpace,
  HeldOutCanary,
  InsertedCanary,
  Manifest,
  ModelSpec,
  Probe,
  TrainingSpec,
} from '../contracts/index.js';
import { MANIFEST_VERSION } from '../contracts/index.js';
import { codeSpaceOf, type LoadedGrid, type VisibilityValue } from '../grid/index.js';
import { spaceSize } from '../codes/index.js';
import type { CanaryPool, PoolCanary } from './canaries.js';
import { cueEncoding, type CueEncoding } from '../codes/index.js';
import { GRID_FILE } from '../layout.js';
import type { RunLayout } from './plan-run.js';
import { togetherCandidates } from './designs-together.js';
import { canaryProbes } from './probes.js';
import { sampledTextSpec } from './sampled-text.js';
import type { Task, TaskSpec } from './tasks/index.js';

/** Where a manifest says the audit's grid is, relative to its own folder (runs/<run_id>/). */
export const GRID_FILE_FROM_RUN = `../../${GRID_FILE}`;

/** Every manifest field that does not depend on written files (run_id, rows, utility, provenance). */
export type ManifestCore = Omit<Manifest, 'run_id' | 'rows' | 'utility' | 'provenance'>;

/** What a run needs to render rows and probes: its task generator and training cue. */
export interface RunRenderer {
  task: Task;
  taskSpec: TaskSpec;
  /**
   * The task value without its `utility` source: what seeds the background rows and the canaries'
   * carrier messages, so naming a utility source apart changes the utility rows only.
   */
  rowSpec: TaskSpec;
  cue: CueEncoding;
}

/** A task value without its `utility` key (the same object when it has none). */
export function rowSpecOf(spec: TaskSpec): TaskSpec {
  if (spec.params.utility === undefined) return spec;
  const { utility: _utility, ...params } = spec.params;
  return { ...spec, params };
}

export function runRenderer(grid: LoadedGrid, layout: RunLayout): RunRenderer {
  const taskSpec = layout.cell.values.task.value;
  return {
    task: layout.task,
    taskSpec,
    rowSpec: rowSpecOf(taskSpec),
    cue: cueEncoding(
      layout.cell.values.visibility.value as VisibilityValue,
      layout.together?.space ?? layout.secrets?.space ?? codeSpaceOf(grid.doc),
    ),
  };
}

/**
 * The cell's labels as the manifest records them: a grid that does not name the design axis (every
 * grid before it existed) leaves it out, so its manifests, and run ids, stay byte for byte.
 */
export function manifestCellLabels(grid: LoadedGrid, cell: RunLayout['cell']): Record<string, string | number | null> {
  const { design, ...rest } = cell.labels;
  return grid.expansion.named.includes('design') ? { ...rest, design } : rest;
}

export function buildManifestCore(
  grid: LoadedGrid,
  auditId: string,
  pool: CanaryPool,
  layout: RunLayout,
): ManifestCore {
  const { doc } = grid;
  const { cell } = layout;
  const { task, rowSpec, cue } = runRenderer(grid, layout);
  const { secrets, together } = layout;
  const space = together?.space ?? secrets?.space ?? codeSpaceOf(doc);
  const sampled = together !== undefined || secrets !== undefined || doc.candidates.kind === 'sampled';
  const decoys = together ? together.size - 1 : (secrets?.decoys ?? (doc.candidates.decoys as number));
  // Designs together: each canary's candidates and design come from its own design's space.
  const candidatesOf = (c: PoolCanary): string[] => {
    if (!together) return c.candidates as string[];
    const design = together.designs[together.shares.get(c.id) ?? 0];
    return togetherCandidates(c, design?.space ?? space);
  };
  const designTag = (c: PoolCanary): { design?: string } => {
    const design = together?.designs[together.shares.get(c.id) ?? 0];
    return design ? { design: design.label } : {};
  };
  const probeOptions = { kinds: doc.probes.kinds, decode: doc.probes.decode };

  const canaries: InsertedCanary[] = layout.canaries.map((c) => ({
    id: c.canary.id,
    cohort: c.cohort,
    identity: pool.identity(task, c.canary.id).text,
    code: c.canary.code,
    cue: {
      visibility: cue.visibility,
      text: cue.encode(c.canary.code),
      ...(Object.keys(cue.params).length > 0 ? { params: { ...cue.params } } : {}),
    },
    dose: c.dose,
    window: [c.window[0], c.window[1]],
    positions: c.positions,
    ...(sampled ? { candidates: candidatesOf(c.canary) } : {}),
    ...designTag(c.canary),
  }));
  const heldOut: HeldOutCanary[] = layout.heldOut.map((c) => ({
    id: c.id,
    identity: pool.identity(task, c.id).text,
    code: c.code,
    ...(sampled ? { candidates: candidatesOf(c) } : {}),
    ...designTag(c),
  }));

  const probed: PoolCanary[] = [
    ...layout.canaries.filter((c) => doc.probes.auxiliary || c.cohort === 'focal').map((c) => c.canary),
    ...layout.heldOut,
  ];
  const probes: Probe[] = probed.flatMap((c) => canaryProbes(pool, task, rowSpec, cue, c, probeOptions));

  const m = cell.values.model.value;
  const seed = cell.values.seed.value;
  const model: ModelSpec = {
    backend: m.backend,
    name: m.name,
    revision: m.revision,
    init_seed: seed,
    ...(m.tiny ? { tiny: { ...m.tiny } } : {}),
    ...(m.hf ? { hf: structuredClone(m.hf) } : {}),
    finetune: structuredClone(m.finetune),
  };
  const s = cell.values.schedule.value;
  const t = doc.training;
  const training: TrainingSpec = {
    lr: t.lr,
    schedule: { kind: s.kind, warmup_updates: s.warmup_updates, min_lr_ratio: s.min_lr_ratio },
    batch_size: t.batch_size,
    updates: grid.updates,
    max_length: t.max_length ?? m.tiny?.max_len ?? 1024,
    seed,
    weight_decay: t.weight_decay,
    betas: [t.betas[0], t.betas[1]],
    grad_clip: t.grad_clip,
    checkpoint_every: t.checkpoint_every,
    loss_explode: t.loss_explode,
    device: t.device,
    // Only for runs over several GPUs: a one-process run's manifest (and so its run id) is unchanged.
    ...(t.gpus !== undefined && t.gpus > 1 ? { gpus: t.gpus, parallel: t.parallel ?? 'fsdp' } : {}),
  };
  const candidateSpace: CandidateSpace = sampled
    ? {
        kind: 'sampled',
        alphabet: space.alphabet,
        length: space.length,
        size: 1 + decoys,
        decoys,
        seed: doc.seed,
      }
    : { kind: 'exhaustive', alphabet: space.alphabet, length: space.length, size: spaceSize(space) };

  return {
    schema_version: MANIFEST_VERSION,
    audit: {
      id: auditId,
      name: doc.name,
      grid_file: GRID_FILE_FROM_RUN,
      grid_sha256: grid.sha256,
      cell_id: cell.id,
      cell: manifestCellLabels(grid, cell),
    },
    task: {
      name: task.name,
      seed: doc.seed,
      params: structuredClone(task.params),
      ...(task.dataset ? { dataset: structuredClone(task.dataset) } : {}),
      ...(task.utilityDataset ? { utility_dataset: structuredClone(task.utilityDataset) } : {}),
    },
    model,
    training,
    canaries,
    held_out: heldOut,
    probes,
    candidate_space: candidateSpace,
    eval: {
      base_model: doc.eval.base_model,
      checkpoints: [...doc.eval.checkpoints],
      max_new_tokens: doc.eval.max_new_tokens,
      score_batch_size: doc.eval.score_batch_size,
    },
    ...(secrets?.kind === 'sampled-text' && secrets.sampling
      ? {
          sampled_text: sampledTextSpec(
            { ...secrets.sampling, decoys: secrets.decoys },
            doc.seed,
            [...canaries, ...heldOut].map((c) => c.id),
          ),
        }
      : {}),
    ...(doc.canaries.inclusion === 'randomized'
      ? {
          inclusion: {
            kind: 'randomized' as const,
            p: 0.5,
            pool: doc.canaries.focal + doc.canaries.held_out,
            seed: doc.seed,
          },
        }
      : {}),
  };
}

import { isAbsolute, relative, resolve } from 'node:path';
import { artifactError, quoteValue, UserInputError } from '../errors.js';
import { exposure, exposureCeiling } from '../metrics/exposure.js';
import { extrapolatedExposure } from '../metrics/exposure-extrapolation.js';
import { rankOfIndex, RankInputError } from '../metrics/rank.js';
import { copiedShownCode, exactRecovery } from '../metrics/recovery.js';
import type { ExtrapolatedReading, GreedyObservation, Observation } from '../metrics/observation.js';
import { describeSchemaErrors, validate } from '../schemas/index.js';
import type { Greedy, Result } from '../contracts/result.js';
import type { Provenance } from '../provenance/index.js';
import type { Numerics, WeightChange } from '../contracts/result.js';
import { readJsonFile } from '../fs/index.js';
import type { LoadedRun } from './load-audit.js';
import type { ManifestInfo } from './manifest-info.js';
import { readScoreFile } from './scores.js';
import { readUtilityScores, type UtilityScores } from './utility.js';

/**
 * Turn one finished run's result.json and score files into observations. Score files are read
 * one at a time and reduced at once to a per-probe summary (rank, score of the true code, ...),
 * so memory holds one score vector, never a run's or an audit's.
 */
export interface RunOutcome {
  observations: Observation[];
  phases: string[];
  utility: { rows: number | null; base_loss: number | null; final_loss: number | null };
  /** Per-row scores of the utility replies, when the manifest asks for generation metrics. */
  utilityScores: UtilityScores | null;
  provenance: Provenance;
  /** The run's floating-point path (null in results written before it was recorded). */
  numerics: Numerics | null;
  /** How far fine-tuning moved each parameter group (null: not recorded). */
  weightChange?: WeightChange | null;
  scoreFiles: number;
}

export interface ObserveHooks {
  /** Replaces the score reader (tests count how many score vectors are alive at once). */
  readScores?: typeof readScoreFile;
  /** Extrapolated exposure for every probe of a sampled space (a skew-normal fit per probe). Default false. */
  extrapolate?: boolean;
}

/** The true code's extrapolated exposure from the other candidates' scores (the decoys). */
function extrapolate(scores: Float32Array, trueIndex: number, trueScore: number): ExtrapolatedReading {
  const decoys = new Float64Array(scores.length - 1);
  for (let i = 0, j = 0; i < scores.length; i += 1) if (i !== trueIndex) decoys[j++] = scores[i] as number;
  const r = extrapolatedExposure(trueScore, decoys);
  return { exposure: r.exposure, fitted_exposure: r.fitted_exposure, status: r.status };
}

function greedyObservation(g: Greedy | undefined, trueCode: string, shown: string | null): GreedyObservation | null {
  if (g === undefined) return null;
  return { code: g.code, recovered: exactRecovery(g, trueCode) as boolean, copied: copiedShownCode(g, shown) };
}

export async function observeRun(run: LoadedRun, hooks: ObserveHooks = {}): Promise<RunOutcome> {
  const manifest = run.manifest as ManifestInfo;
  const path = run.resultPath;
  const raw = await readJsonFile(path);
  const errors = validate('result', raw);
  if (errors.length > 0)
    throw artifactError(
      path,
      'result',
      `does not match schemas/result.schema.json: ${describeSchemaErrors(errors).slice(0, 3).join('; ')}`,
    );
  const result = raw as Result;
  if (result.run_id !== manifest.run_id)
    throw artifactError(
      path,
      'run_id',
      `is ${quoteValue(result.run_id)} but its manifest is ${quoteValue(manifest.run_id)}`,
    );
  const space = manifest.space;
  if (result.candidate_space.kind !== space.kind || result.candidate_space.size !== space.size) {
    throw artifactError(
      path,
      'candidate_space',
      `is ${result.candidate_space.kind} |C|=${result.candidate_space.size} but manifest.json asks for ${space.kind} |C|=${space.size}: the scores were computed over another space — rerun the run`,
    );
  }
  // Design sampled-text: the manifest's codes are placeholders; the trainer's texts replace them.
  const texts = result.sampled_text?.canaries;
  if (manifest.sampled_text && !texts)
    throw artifactError(
      path,
      'sampled_text',
      'is missing but manifest.json plans sampled-text canaries: the trainer that wrote it did not sample their secrets — rerun the run',
    );
  const textOf = (canaryId: string, placeholder: string, kind: string): string => {
    const t = texts?.[canaryId];
    if (!texts) return placeholder;
    if (!t) throw artifactError(path, 'sampled_text.canaries', `has no texts for canary ${quoteValue(canaryId)}`);
    return kind === 'substituted' ? t.substitute : t.secret;
  };
  const ceiling = exposureCeiling(space.size);
  const read = hooks.readScores ?? readScoreFile;
  const observations: Observation[] = [];
  let scoreFiles = 0;

  for (const [e, evaluation] of result.evaluations.entries()) {
    for (const [p, probe] of evaluation.probes.entries()) {
      const where = `evaluations[${e}].probes[${p}]`;
      const info = manifest.probes.get(probe.probe_id);
      if (!info)
        throw artifactError(path, `${where}.probe_id`, `${quoteValue(probe.probe_id)} is not a probe of manifest.json`);
      const canary = manifest.canaries.get(info.canary_id);
      if (!canary || probe.canary_id !== info.canary_id) {
        throw artifactError(
          path,
          `${where}.canary_id`,
          `${quoteValue(probe.canary_id)} but manifest.json ties probe ${quoteValue(probe.probe_id)} to ${quoteValue(info.canary_id)}`,
        );
      }
      if (probe.kind !== info.kind)
        throw artifactError(
          path,
          `${where}.kind`,
          `${quoteValue(probe.kind)} but manifest.json says ${quoteValue(info.kind)}`,
        );
      const insertedRole = canary.role === 'focal' || canary.role === 'auxiliary';
      if ((probe.arm === 'inserted') !== insertedRole) {
        throw artifactError(
          path,
          `${where}.arm`,
          `${quoteValue(probe.arm)} but canary ${quoteValue(canary.id)} is ${insertedRole ? 'inserted' : 'never inserted'} in manifest.json`,
        );
      }
      if (probe.n_candidates !== space.size) {
        throw artifactError(
          path,
          `${where}.n_candidates`,
          `${probe.n_candidates} but the candidate space has ${space.size} codes`,
        );
      }
      const scorePath = resolve(run.outputDir, probe.scores_file);
      const inside = relative(run.outputDir, scorePath);
      if (inside.startsWith('..') || isAbsolute(inside))
        throw artifactError(
          path,
          `${where}.scores_file`,
          `${quoteValue(probe.scores_file)} points outside the run's output folder`,
        );

      const scores = await read(scorePath, { n: probe.n_candidates, sha256: probe.scores_sha256 });
      scoreFiles += 1;
      let summary;
      let shownRank: number | null = null;
      try {
        summary = rankOfIndex(scores, canary.trueIndex);
        if (info.kind === 'substituted' && info.shownIndex >= 0 && info.shownIndex !== canary.trueIndex) {
          shownRank = rankOfIndex(scores, info.shownIndex).rank;
        }
      } catch (error) {
        if (error instanceof RankInputError)
          throw new UserInputError(`${error.message}: the trainer wrote an invalid score`, {
            location: { file: scorePath },
            code: 'E_BAD_SCORES',
          });
        throw error;
      }
      const code = textOf(canary.id, canary.code, 'secret');
      const shown = info.shown_code === null ? null : textOf(canary.id, info.shown_code, info.kind);
      // Only this summary outlives the iteration; the score vector is garbage from here on.
      observations.push({
        run_id: run.run_id,
        phase: evaluation.phase,
        update: evaluation.update,
        canary_id: canary.id,
        code,
        role: canary.role,
        cohort: canary.cohort,
        dose: canary.dose,
        visibility: canary.visibility,
        probe_id: info.id,
        probe_kind: info.kind,
        shown_code: shown,
        space_kind: space.kind,
        space_size: space.size,
        rank: summary.rank,
        ties: summary.ties,
        exposure: exposure(summary.rank, space.size),
        exposure_ceiling: ceiling,
        true_score: summary.trueScore,
        best_other_score: summary.bestOtherScore,
        shown_rank: shownRank,
        shown_exposure: shownRank === null ? null : exposure(shownRank, space.size),
        greedy_prefill: greedyObservation(probe.greedy.prefill, code, shown),
        greedy_free: greedyObservation(probe.greedy.free, code, shown),
        ...(hooks.extrapolate && space.kind === 'sampled'
          ? { extrapolated: extrapolate(scores, canary.trueIndex, summary.trueScore) }
          : {}),
        ...(canary.design !== undefined ? { design: canary.design } : {}),
      });
    }
  }
  return {
    observations,
    phases: result.evaluations.map((e) => e.phase),
    utility: {
      rows: result.utility.rows ?? null,
      base_loss: result.utility.base_loss ?? null,
      final_loss: result.utility.final_loss ?? null,
    },
    utilityScores: await readUtilityScores(run, result),
    provenance: result.provenance,
    numerics: result.numerics ?? null,
    weightChange: result.weight_change ?? null,
    scoreFiles,
  };
}

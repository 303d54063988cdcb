import { deflateSync } from 'node:zlib';
import { Rng } from '../random.js';
import type { Interval } from './privacy.js';

/**
 * Membership scores of one canary in one run, each oriented so that larger means "more likely
 * trained on" (docs/metrics.md, Canary designs). All come from the score files the trainer
 * already stores (the true secret's summed log-probability given the probe, natural log):
 * - `exposure`: log2|C| − log2 rank among the candidates (the study's readout);
 * - `loss`: the final model's log-probability of the secret, i.e. minus its loss (Yeom et al. 2018);
 * - `reference_ratio`: that log-probability minus the base model's (the reference-model ratio
 *   of Carlini et al. 2021 with the pre-fine-tuning base as reference; Mireshghallah et al. 2022);
 * - `zlib_ratio`: the log-probability divided by the secret's zlib-compressed length in bytes
 *   (Carlini et al. 2021, "zlib entropy"): a likelihood normalised by how compressible the secret is.
 */
export const MEMBERSHIP_SCORES = ['exposure', 'loss', 'reference_ratio', 'zlib_ratio'] as const;
export type MembershipScore = (typeof MEMBERSHIP_SCORES)[number];

/** What one score needs of a canary in a run: its final-phase readout and, for the ratio, the base's log-probability. */
export interface ScoreInput {
  exposure: number;
  /** Final model: summed log-probability of the secret (nats). */
  log_prob: number;
  /** Base model: the same, or null when the audit did not score the base. */
  base_log_prob: number | null;
  secret: string;
}

/** zlib-compressed length of `text` in bytes (deflate, default level, zlib header included). */
export function zlibBytes(text: string): number {
  return deflateSync(Buffer.from(text, 'utf8')).length;
}

/** The score of one kind, or null where it cannot be formed (the reference ratio without base scores). */
export function membershipScore(kind: MembershipScore, x: ScoreInput): number | null {
  switch (kind) {
    case 'exposure':
      return x.exposure;
    case 'loss':
      return x.log_prob;
    case 'reference_ratio':
      return x.base_log_prob === null ? null : x.log_prob - x.base_log_prob;
    case 'zlib_ratio':
      return x.log_prob / zlibBytes(x.secret);
  }
}

/** Mann–Whitney AUC of members over non-members (ties count ½); null without both kinds. */
export function pooledAuc(members: readonly number[], others: readonly number[]): number | null {
  if (members.length === 0 || others.length === 0) return null;
  let wins = 0;
  for (const a of members) for (const b of others) wins += a > b ? 1 : a === b ? 0.5 : 0;
  return wins / (members.length * others.length);
}

/**
 * AUC over canaries crossed with runs (the same canaries, same roles, in every run): the AUC of
 * every (run, canary) score pooled, with a percentile interval from a two-way bootstrap that
 * resamples runs and, independently, member and non-member canaries (so the interval covers both
 * canary sampling and run-to-run variation, as the report's crossed exposure intervals do).
 * `scores[r][c]` is canary c's score in run r (null: missing there).
 */
export function crossedAuc(
  scores: readonly (readonly (number | null)[])[],
  member: readonly boolean[],
  options: { confidence: number; resamples: number; seed: number },
): (Interval & { n_runs: number; n_in: number; n_out: number }) | null {
  const ins = member.flatMap((m, c) => (m ? [c] : []));
  const outs = member.flatMap((m, c) => (m ? [] : [c]));
  const runs = scores.length;
  const collect = (rs: readonly number[], cs: readonly number[]): number[] =>
    rs.flatMap((r) => cs.flatMap((c) => ((scores[r]?.[c] ?? null) === null ? [] : [scores[r]?.[c] as number])));
  const all = Array.from({ length: runs }, (_, r) => r);
  const estimate = pooledAuc(collect(all, ins), collect(all, outs));
  if (estimate === null) return null;
  const rng = new Rng(options.seed, 'crossed-auc');
  const draw = (xs: readonly number[]): number[] => xs.map(() => xs[rng.int(xs.length)] as number);
  const values: number[] = [];
  for (let b = 0; b < options.resamples; b += 1) {
    const rs = draw(all);
    const v = pooledAuc(collect(rs, draw(ins)), collect(rs, draw(outs)));
    if (v !== null) values.push(v);
  }
  values.sort((a, b) => a - b);
  const alpha = 1 - options.confidence;
  const at = (q: number): number =>
    values[Math.min(values.length - 1, Math.max(0, Math.floor(q * values.length)))] as number;
  return { estimate, lo: at(alpha / 2), hi: at(1 - alpha / 2), n_runs: runs, n_in: ins.length, n_out: outs.length };
}

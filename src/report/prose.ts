import type { ReportSummary } from './summary.js';

/**
 * The report's long explanatory paragraphs, kept apart from the document's structure
 * (document.ts) so both read easily. Each is written across lines with the `prose` tag, which joins
 * a line break and the indentation after it into one space and trims the ends: the rendered text
 * is one line, the same as before it moved here.
 */
export function prose(strings: TemplateStringsArray, ...values: unknown[]): string {
  const joined = (part: string, i: number): string =>
    part.replace(/\n\s*/g, ' ') + (i < values.length ? String(values[i]) : '');
  return strings.map(joined).join('').trim();
}

/** How medians and proportions carry intervals, and how pooled runs are resampled (Methods and counts). */
export function resamplingNote(settings: ReportSummary['settings']): string {
  return prose`
    Medians carry bootstrap ${Math.round(settings.confidence * 100)}% intervals (${settings.resamples}
    resamples, seed ${settings.seed}); proportions carry Wilson intervals (a copy rate pooling several
    runs carries design-Wilson: see “Recovery”); n canaries and n runs are printed beside every figure.
    Canaries of one run share its training, and the same canary in several runs shares its code, so a
    median that pools several runs is resampled by the design read from the manifests: crossed (the same
    canaries in every run: runs and canaries resampled independently, two-way) or nested (each run its
    own canaries: runs, then canaries within each drawn run), each studentised with a variance-component
    correction (coverage measured in docs/metrics.md); a figure from a single run (per arm) says so, and
    its interval covers canary sampling only. Each figure names the resampling it used. Δ = inserted −
    control (difference of medians). Seed axes pooled: ${settings.seed_axes.join(', ') || 'none'}.
    Recovery uses greedy decoding after the prefill unless marked free.
  `;
}

/** What exact recovery and copying mean, and how a pooled copy rate gets its interval (Recovery). */
export const RECOVERY_NOTE = prose`
  Exact recovery: the greedy output holds exactly the true code. Ranking first is not the same as
  generating the code, so both are shown. On substituted probes (another code shown in the prompt)
  “Recovered” is recall of the original and “Copied” is the rate of reproducing the shown code; the
  held-out canaries’ copy rate beside it says how much of that copying the model does for any
  record, trained on or not. Copying is close to all-or-nothing per run (a seed’s model copies a
  shown code or it does not), so a copy rate pooling several runs does not count its canaries × runs
  as independent trials: its interval (design-Wilson) is Wilson’s at the effective number of trials
  the design’s variance implies (runs × canaries, crossed or nested as for the medians), with a t
  quantile, and when every run copies none (or all) of its canaries, each run counts as one trial
  (the exact bound for R trials: 0 of 48 over 3 runs gives [0, 0.71]);
  one run keeps Wilson over its canaries. “Copied per run” gives each run’s count.
`;

/** How one-axis comparisons pair canaries and which resampling their intervals use (Paired differences). */
export const PAIRED_NOTE = prose`
  Runs whose cells differ in exactly one axis, paired canary by canary (same id and code), pooled
  over seeds. Δ = exposure(later value) − exposure(earlier value), values in order (numbers
  numerically, placements early → middle → late). Held-out rows pair never-inserted canaries: their
  shift is the comparison’s null. Intervals follow the comparison’s design, named under each table
  (crossed, the same canaries in every run pair: run pairs and canaries resampled independently;
  nested: run pairs, then canary pairs within them); a comparison with a single run pair (one run
  per arm) covers canary sampling only and says so.
`;

/** What the task metrics score and how their intervals are drawn (Utility). */
export const TASK_METRICS_NOTE = prose`
  Task metrics: the base model’s and the fine-tuned model’s greedy replies to the same rows, scored
  against their targets: accuracy (the trimmed reply equals the target), exact match (TAT-QA-style
  normalised answer, scale included), token F1 (bag of normalised tokens). One run: accuracy and
  exact match with Wilson 95% intervals, token F1 with a percentile bootstrap over rows; a cell
  pooling several runs: the mean over their rows, resampled runs → rows. Δ = after − before.
`;

/** How membership inference, TPR at a target FPR and the ε lower bounds are read (Privacy readouts). */
export function privacyNote(readout: { probe_kind: string; epsilon: { confidence: number; delta: number } }): string {
  return prose`
    Membership inference from the same canaries: each canary's exposure is its membership score;
    inserted canaries are members, held-out ones are not (final phase, ${readout.probe_kind} probes).
    AUC with DeLong's ${Math.round(readout.epsilon.confidence * 100)}% interval; TPR at a target FPR
    with a Clopper–Pearson interval (the threshold lets at most ⌊FPR·n_out⌋ held-out canaries through,
    so an FPR below 1/n_out is read as 0 false positives). ε lower bounds at δ =
    ${readout.epsilon.delta} and ${Math.round(readout.epsilon.confidence * 100)}% confidence:
    Clopper–Pearson over every threshold (Bonferroni-corrected), and the one-run bound of Steinke, Nasr
    & Jagielski (2023), which holds only when each canary's inclusion was a fair coin and is refused
    otherwise. One row per run: a rerun can fall outside these intervals. Tied scores decide nothing by
    their order: AUC counts a tie ½, the TPR threshold passes only scores strictly above it, and the
    one-run auditor makes no guess on a tied block that straddles its cut (docs/metrics.md, Ties).
  `;
}

import { stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import { UserInputError, quoteValue, terminalSafe } from '../errors.js';
import { defaultArtifactsDir } from '../paths.js';
import { parseFormats, writeReport, REPORT_FORMATS, THRESHOLD_STRATEGIES } from '../report/index.js';
import { intOption, stringOption, type Command } from './command.js';
import { jsonLine } from './json-output.js';
import { AUDIT_INDEX_FILE, auditDirOf, auditsRoot } from '../layout.js';

/**
 * `canary-audit report AUDIT`: recompute every figure of an audit from its stored scores (no GPU,
 * no Redis) and write the report files.
 */
async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** AUDIT is a folder holding audit.json, a path to audit.json, or an id under <artifacts>/audits/. */
export async function resolveAuditDir(audit: string, artifactsDir: string): Promise<string> {
  const asPath = resolve(audit);
  if (basename(asPath) === AUDIT_INDEX_FILE && !(await isDir(asPath))) return dirname(asPath);
  if (await isDir(asPath)) return asPath;
  const byId = auditDirOf(artifactsDir, audit);
  if (await isDir(byId)) return byId;
  throw new UserInputError(
    `no audit ${quoteValue(audit)}: neither a folder nor an id under ${auditsRoot(artifactsDir)}; pass an audit folder, or its id with --artifacts DIR (default $CANARY_AUDIT_HOME or ./artifacts)`,
    { field: 'AUDIT', code: 'E_NO_AUDIT' },
  );
}

export const command: Command = {
  name: 'report',
  summary: 'Compute exposure and recovery from stored scores; write reports.',
  usage:
    'AUDIT [--format md,csv,json,html] [--out DIR] [--artifacts DIR] [--margin BITS] [--threshold-strategy NAME] [--extrapolate] [--json]',
  description: `
AUDIT is an audit id (looked up under <artifacts>/audits/) or the path of an audit folder.
Writes report.md, report.csv (one row per run x canary x probe x phase), summary.json
(schemas/report.schema.json) and report.html (plots as SVG, also in plots/). Failed and missing
runs are listed in the report; a damaged artifact (truncated score file, wrong candidate space)
stops with an error naming the file. Exit codes: 0 ok, 1 failure, 2 bad input or bad artifact.`,
  options: {
    format: {
      type: 'string',
      value: 'LIST',
      description: `Comma-separated formats among ${REPORT_FORMATS.join(', ')}. Default: all.`,
    },
    out: { type: 'string', value: 'DIR', description: 'Output folder. Default: <audit folder>/report.' },
    artifacts: {
      type: 'string',
      value: 'DIR',
      description: 'Artifact root for audit ids. Default: $CANARY_AUDIT_HOME or ./artifacts.',
    },
    seed: { type: 'string', value: 'N', description: 'Bootstrap seed (same seed, same intervals). Default 0.' },
    resamples: { type: 'string', value: 'N', description: 'Bootstrap resamples per interval. Default 2000.' },
    margin: {
      type: 'string',
      value: 'BITS',
      description: "Equivalence margin of the verdicts, bits (> 0). Default: the grid's analysis.margin_bits, else 1.",
    },
    'threshold-strategy': {
      type: 'string',
      value: 'NAME',
      description:
        "How the Clopper–Pearson, binomial one-run and f-DP one-run ε bounds pick their threshold: bonferroni (every candidate threshold, level split), split (choose on half the canaries, audit the other half; seeded by --seed) or multisplit (median of 100 splits at half the level, Meinshausen et al. 2009); the GDP bound stays bonferroni (as in jax_privacy). Default: the grid's analysis.threshold_strategy, else bonferroni.",
    },
    extrapolate: {
      type: 'boolean',
      description:
        "Extrapolated exposure for probes of a sampled candidate space: a skew-normal fitted to each probe's decoy scores, read beyond the rank ceiling, with a fit diagnostic (summary.json extrapolation, and per sampled design in the Canary designs section; docs/metrics.md). About 35-60 ms per probe at 1,000 decoys. Default: the grid's analysis.extrapolate, else off.",
    },
    json: {
      type: 'boolean',
      description:
        'Print {schema_version, audit_dir, files, summary, counts, warnings} as JSON on stdout; schemas/report-output.schema.json.',
    },
  },
  positionals: [1, 1],
  async run(args) {
    const artifacts = resolve(stringOption(args, 'artifacts') ?? defaultArtifactsDir());
    const auditDir = await resolveAuditDir(args.positionals[0] as string, artifacts);
    const formatText = stringOption(args, 'format');
    const out = stringOption(args, 'out');
    const marginText = stringOption(args, 'margin');
    const margin = marginText === undefined ? undefined : Number(marginText);
    if (margin !== undefined && !(margin > 0 && Number.isFinite(margin)))
      throw new UserInputError(`--margin must be a number of bits > 0, got ${JSON.stringify(marginText)}`, {
        field: '--margin',
        code: 'E_BAD_FLAG',
      });
    const strategyText = stringOption(args, 'threshold-strategy');
    if (strategyText !== undefined && !(THRESHOLD_STRATEGIES as readonly string[]).includes(strategyText)) {
      throw new UserInputError(
        `--threshold-strategy must be one of ${THRESHOLD_STRATEGIES.join(', ')}, got ${JSON.stringify(strategyText)}`,
        { field: '--threshold-strategy', code: 'E_BAD_FLAG' },
      );
    }
    const result = await writeReport({
      auditDir,
      ...(out !== undefined ? { outDir: resolve(out) } : {}),
      ...(formatText !== undefined ? { formats: parseFormats(formatText) } : {}),
      seed: intOption(args, 'seed', 0, 0),
      resamples: intOption(args, 'resamples', 2000, 1),
      ...(margin !== undefined ? { marginBits: margin } : {}),
      ...(strategyText !== undefined
        ? { thresholdStrategy: strategyText as (typeof THRESHOLD_STRATEGIES)[number] }
        : {}),
      ...(args.values.extrapolate ? { extrapolate: true } : {}),
    });
    if (args.values.json) {
      process.stdout.write(
        jsonLine('report', {
          audit_dir: auditDir,
          files: result.files,
          summary: result.summaryPath ?? null,
          counts: result.counts,
          warnings: result.warnings,
        }),
      );
    } else {
      for (const file of result.files) process.stdout.write(`wrote ${file}\n`);
      const c = result.counts;
      process.stdout.write(
        `${c.finished}/${c.runs} runs finished, ${c.failed} failed, ${c.missing} missing; ${result.warnings.length} warning(s)\n`,
      );
      for (const w of result.warnings) process.stdout.write(`warning (${w.kind}): ${w.message}\n`);
      for (const v of result.verdicts) process.stdout.write(terminalSafe(`verdict: ${v}\n`));
    }
    return 0;
  },
};

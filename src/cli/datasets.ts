import { existsSync, statSync } from 'node:fs';
import { datasetFetchRequest, fetchDatasetToCache, gridDatasetRequests } from '../app/index.js';
import type { FetchedDataset } from '../datasets/index.js';
import { UserInputError } from '../errors.js';
import { hubCacheDir } from '../hub/index.js';
import { FetchProgressView, formatBytes } from './fetch-progress.js';
import { stringOption, type Command } from './command.js';

/** `canary-audit datasets fetch REPO`: download a Hub dataset's card and split files into the local Hugging Face cache. */
export const command: Command = {
  name: 'datasets',
  summary: 'Download Hub datasets (card and split files) into the local Hugging Face cache.',
  usage: 'fetch GRID|REPO [--revision R] [--config C] [--split S ...] [--json]',
  description: `
\`datasets fetch\` resolves REPO's revision (default main) to its commit sha and downloads the
dataset card (README.md) and the files of the splits asked for (--split, repeatable; default every
split of the config) into the standard Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub: datasets--org--name/ with blobs/, snapshots/<commit>/ and
refs/<revision>), where \`plan\` finds them without the Hub (unreachable, or HF_HUB_OFFLINE=1) and
\`huggingface_hub\` / \`datasets\` find them too. Splits come from --split names, the card's
\`configs\` (--config, default: the default config) or the Hub's file naming conventions; only
their files are downloaded. Files already in the cache are not downloaded again; each file is
written to a temporary name, checked against the Hub's hash and renamed. Progress goes to stderr.
The Hub is $HF_ENDPOINT (default https://huggingface.co). A token for gated or private datasets is
read from $HF_TOKEN, $HUGGING_FACE_HUB_TOKEN or the file \`hf auth login\` writes; it is sent only
to the Hub and never printed.
GRID (a grid file) fetches every Hub dataset its tasks read (banking77, tat-qa, dataset with a
repo source), each at the revision its source names and with the splits its task reads; the
flags apply to REPO only. With --json, GRID prints an array.
Exit codes: 0 fetched, 1 Hub unreachable or a download failed, 2 bad arguments, unknown dataset,
revision, config or split, or a gated dataset without access.`,
  actions: {
    fetch: 'download datasets into the local Hugging Face cache',
  },
  options: {
    revision: { type: 'string', value: 'R', description: 'Branch, tag or commit sha (default: main).' },
    config: {
      type: 'string',
      value: 'C',
      description: "The card's config (subset) whose files to fetch (default: its default config).",
    },
    split: {
      type: 'string',
      value: 'S',
      multiple: true,
      description: 'A split to fetch (repeatable; default: every split of the config).',
    },
    json: {
      type: 'boolean',
      description:
        'Print {repo, revision, sha, config, snapshot_dir, splits, files, downloaded_files, downloaded_bytes} as JSON on stdout.',
    },
  },
  positionals: [2, 2],
  async run(args) {
    const [action, target] = args.positionals as [string, string];
    if (action !== 'fetch')
      throw new UserInputError(
        `unknown action ${JSON.stringify(action)}; usage: canary-audit datasets fetch GRID|REPO`,
        { code: 'E_BAD_ARGS' },
      );
    const splits = (args.values.split as string[] | undefined) ?? [];
    const flags = { revision: stringOption(args, 'revision'), config: stringOption(args, 'config'), splits };
    const grid = existsSync(target) && statSync(target).isFile();
    if (grid && (flags.revision !== undefined || flags.config !== undefined || splits.length > 0)) {
      throw new UserInputError(
        `--revision, --config and --split apply to a single REPO; ${target} is a grid, whose tasks name their own source and splits`,
        { field: '--revision', code: 'E_BAD_FLAG' },
      );
    }
    const requests = grid ? await gridDatasetRequests(target) : [datasetFetchRequest(target, flags)];
    const json = Boolean(args.values.json);
    if (grid && requests.length === 0) {
      process.stdout.write(
        json ? '[]\n' : `${target} reads no Hub dataset (generated tasks and local sources need no fetch)\n`,
      );
      return 0;
    }
    const fetched: FetchedDataset[] = [];
    for (const request of requests) {
      const view = new FetchProgressView();
      process.stderr.write(`fetching dataset ${request.repo}@${request.revision ?? 'main'} into ${hubCacheDir()}\n`);
      try {
        fetched.push(await fetchDatasetToCache(request, { progress: view }));
      } finally {
        view.endLine();
      }
    }
    if (json)
      process.stdout.write(
        `${JSON.stringify(grid ? fetched.map(fetchedJson) : fetchedJson(fetched[0] as FetchedDataset), null, 2)}\n`,
      );
    else process.stdout.write(fetched.map(fetchedText).join(''));
    return 0;
  },
};

function fetchedJson(f: FetchedDataset): Record<string, unknown> {
  return {
    repo: f.repo,
    revision: f.revision,
    sha: f.sha,
    config: f.config,
    snapshot_dir: f.snapshotDir,
    splits: Object.fromEntries(
      Object.entries(f.splits).map(([split, files]) => [
        split,
        files.map((x) => ({ path: x.path, bytes: x.bytes, cached_path: x.local })),
      ]),
    ),
    files: f.files,
    downloaded_files: f.downloadedFiles,
    downloaded_bytes: f.downloadedBytes,
  };
}

function fetchedText(f: FetchedDataset): string {
  const got =
    f.downloadedFiles === 0
      ? 'all in the cache already'
      : `${f.downloadedFiles} downloaded (${formatBytes(f.downloadedBytes)})`;
  const config = f.config === null ? '' : ` (config ${f.config})`;
  const width = Math.max(0, ...Object.keys(f.splits).map((s) => s.length)) + 2;
  const lines = [`${f.repo}@${f.revision} = ${f.sha}${config}: ${f.files} file(s), ${got}`];
  for (const [split, files] of Object.entries(f.splits)) {
    for (const x of files) lines.push(`  ${split.padEnd(width)}${x.path} (${formatBytes(x.bytes)})`);
  }
  lines.push(`  ${f.snapshotDir}`);
  return `${lines.join('\n')}\n`;
}

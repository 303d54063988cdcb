import { fetchModels, modelsToFetch } from '../app/index.js';
import { UserInputError } from '../errors.js';
import { hubCacheDir, type FetchedSnapshot } from '../hub/index.js';
import { FetchProgressView, formatBytes } from './fetch-progress.js';
import { stringOption, type Command } from './command.js';

/** `canary-audit models fetch GRID|MODEL`: download Hub models into the local Hugging Face cache. */
export const command: Command = {
  name: 'models',
  summary: 'Download Hub models into the local Hugging Face cache, for offline workers.',
  usage: 'fetch GRID|MODEL [--revision R] [--json]',
  description: `
\`models fetch\` downloads a snapshot of each model into the standard Hugging Face cache
($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub: models--org--name/ with blobs/,
snapshots/<commit>/ and refs/<revision>), where workers and the trainer (offline, like
HF_HUB_OFFLINE=1) and \`plan\` without the Hub find it. MODEL is a Hub id (org/name) or a preset
(qwen3-0.6b ...); GRID fetches every Hub model of the grid's model axis at the revision its entry
names. Files already in the cache are not downloaded again; each file is written to a temporary
name, checked against the Hub's hash and renamed. Progress goes to stderr.
The Hub is $HF_ENDPOINT (default https://huggingface.co). A token for gated or private models is
read from $HF_TOKEN, $HUGGING_FACE_HUB_TOKEN or the file \`hf auth login\` writes
($HF_TOKEN_PATH, default $HF_HOME/token); it is sent only to the Hub and never printed.
Exit codes: 0 fetched, 1 Hub unreachable or a download failed, 2 bad arguments, unknown or gated model.`,
  actions: {
    fetch: 'download models into the local Hugging Face cache',
  },
  options: {
    revision: {
      type: 'string',
      value: 'R',
      description: 'Branch, tag or commit sha of MODEL (default: main; a grid entry names its own).',
    },
    json: {
      type: 'boolean',
      description:
        'Print [{name, revision, sha, snapshot_dir, files, downloaded_files, downloaded_bytes}] as JSON on stdout.',
    },
  },
  positionals: [2, 2],
  async run(args) {
    const [action, target] = args.positionals as [string, string];
    if (action !== 'fetch')
      throw new UserInputError(
        `unknown action ${JSON.stringify(action)}; usage: canary-audit models fetch GRID|MODEL`,
        { code: 'E_BAD_ARGS' },
      );
    const models = await modelsToFetch(target, stringOption(args, 'revision') ?? null);
    const json = Boolean(args.values.json);
    if (models.length === 0) {
      if (json) process.stdout.write('[]\n');
      else
        process.stdout.write(
          `${target} names no Hugging Face Hub model (tiny models and local folders need no fetch)\n`,
        );
      return 0;
    }
    const view = new FetchProgressView();
    const onModel = (m: { name: string; revision: string | null }): void =>
      void process.stderr.write(`fetching ${m.name}@${m.revision ?? 'main'} into ${hubCacheDir()}\n`);
    const fetched = await fetchModels(models, { progress: view, onModel });
    view.endLine();
    process.stdout.write(
      json ? `${JSON.stringify(fetched.map(fetchedJson), null, 2)}\n` : fetched.map(fetchedLine).join(''),
    );
    return 0;
  },
};

function fetchedJson(f: FetchedSnapshot): Record<string, unknown> {
  return {
    name: f.name,
    revision: f.revision,
    sha: f.sha,
    snapshot_dir: f.snapshotDir,
    files: f.files,
    downloaded_files: f.downloadedFiles,
    downloaded_bytes: f.downloadedBytes,
  };
}

function fetchedLine(f: FetchedSnapshot): string {
  const got =
    f.downloadedFiles === 0
      ? 'all in the cache already'
      : `${f.downloadedFiles} downloaded (${formatBytes(f.downloadedBytes)})`;
  return `${f.name}@${f.revision} = ${f.sha}: ${f.files} file(s), ${got}\n  ${f.snapshotDir}\n`;
}

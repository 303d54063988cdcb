import { copyFileSync, linkSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { copyFile, link, mkdir, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CanaryAuditError } from '../errors.js';
import { explainWriteError, syncPaths, writeFileAtomic, writeJsonAtomic } from '../fs/index.js';
import { contentHash } from '../hash.js';
import { log } from '../log.js';
import {
  AUDIT_VERSION,
  type AuditIndex,
  type FileRef,
  type ImageRef,
  type Manifest,
  type ModelSpec,
} from '../contracts/index.js';
import type { Provenance } from '../provenance/index.js';
import { describeSchemaErrors, validate } from '../schemas/index.js';
import { finishProvenance } from '../provenance/index.js';
import { auditIndex } from './audit-index.js';
import { buildManifestCore, manifestCellLabels, runRenderer, type RunRenderer } from './manifest.js';
import { pretrainManifestSpec, pretrainRowLines, PRETRAIN_FILE } from './pretrain.js';
import { cleanStaleStaging, stagingName } from './staging.js';
import type { AuditPlan } from './plan.js';
import { writeTracking } from './tracking.js';
import type { RunLayout } from './plan-run.js';
import type { UtilityMetric } from './tasks/index.js';
import {
  backgroundKey,
  backgroundRows,
  imageShas,
  utilityRowLines,
  writeLines,
  writeTrainingRows,
  type BackgroundRows,
} from './rows.js';
import type { ImageStore } from './images/index.js';
import {
  auditDirOf,
  auditIndexPath,
  GRID_FILE,
  IMAGES_DIR,
  MANIFEST_FILE,
  manifestPathOf,
  runDirEntry,
  runDirOf,
  RUNS_DIR,
} from '../layout.js';

export interface WrittenRun {
  runId: string;
  cellId: string;
  cell: Record<string, unknown>;
  runDir: string;
  manifestPath: string;
  /** False when an identical run folder already existed and was left alone. */
  created: boolean;
}

export interface WrittenAudit {
  auditId: string;
  auditDir: string;
  name: string;
  runs: WrittenRun[];
}

/** run id: "run-" + 16 hex of the content hash of the manifest minus run_id and provenance. */
export function runIdOf(
  manifest: Omit<Manifest, 'run_id' | 'provenance'> & Partial<Pick<Manifest, 'run_id' | 'provenance'>>,
): string {
  const { run_id: _id, provenance: _p, ...content } = manifest;
  return `run-${contentHash(content).slice(0, 16)}`;
}

/**
 * Write <artifacts>/audits/<audit_id>/: grid.yaml, one runs/<run_id>/ folder per run (rows.jsonl,
 * utility.jsonl, pretrain.jsonl for a tiny model that pretrains, manifest.json) and audit.json. A
 * run folder is assembled in a private temporary folder and renamed into place, so it appears
 * complete or not at all; manifest.json is written last. Idempotent: a run whose folder already holds its manifest is left alone, and an
 * unchanged audit.json is not rewritten.
 *
 * Durability, in this order: every run's staging folder is written without an fsync per file; one
 * pass makes them all durable (`syncPaths`: a syncfs of the audit's file system, or an fsync of
 * each file and folder); only then are the folders renamed into runs/, so a folder that survives a
 * crash holds whole files; a second pass makes the renames and audit.json durable. When this
 * returns, every run folder and its manifest is on disk: a caller may queue the runs.
 */
export async function writeAudit(plan: AuditPlan, artifactsDir: string): Promise<WrittenAudit> {
  const auditDir = auditDirOf(artifactsDir, plan.auditId);
  try {
    return await writeAuditFiles(plan, auditDir);
  } catch (error) {
    throw explainWriteError(error, auditDir, 'write the audit to') ?? error;
  }
}

async function writeAuditFiles(plan: AuditPlan, auditDir: string): Promise<WrittenAudit> {
  await mkdir(join(auditDir, RUNS_DIR), { recursive: true });
  const removed = await cleanStaleStaging(join(auditDir, '.tmp'));
  if (removed.length > 0) log.info({ removed }, 'removed staging folders of writes that were killed');
  const gridPath = join(auditDir, GRID_FILE);
  if ((await readText(gridPath)) !== plan.gridText) await writeFileAtomic(gridPath, plan.gridText);
  await writeTracking(auditDir, plan.grid.doc.tracking ?? {});

  const runs: WrittenRun[] = [];
  // Shared by every run of this write: what is the same for all of them is made once.
  const shared: Shared = {
    corpora: new Map(),
    background: new Map(),
    generation: new Map(),
    utilityLines: new Map(),
    provenance: finishProvenance(plan.startStamp),
  };
  const corpora = shared.corpora;
  const staged: StagedRun[] = [];
  try {
    // A few runs at a time, so that a run's asynchronous reads and writes (a pretraining corpus,
    // images) overlap another's CPU work. A run's own files go into the page cache with synchronous
    // calls, with no fsync each (one pass below makes them durable): cheaper than a trip through
    // libuv's thread pool per call, which cost about an eighth of submit's CPU at 3,000 runs.
    // Runs that share a background row sequence are written one after another (plan order puts the
    // seed fastest, so a cell's runs each need another sequence): each sequence is made once, not
    // once per cell; `runs` keeps plan order.
    const order = backgroundOrder(plan);
    let next = 0;
    let written = 0;
    const lane = async () => {
      for (let i = next++; i < order.length; i = next++) {
        const k = order[i] as number;
        const { run, stage } = await writeRun(plan, plan.runs[k] as RunLayout, auditDir, shared);
        runs[k] = run;
        if (stage) staged.push(stage);
        written += 1;
        log.info(
          { run: run.runId, cell: run.cellId, n: `${written}/${plan.runs.length}`, created: run.created },
          'run manifest',
        );
      }
    };
    const lanes = await Promise.allSettled(Array.from({ length: Math.min(WRITE_LANES, plan.runs.length) }, lane));
    const failed = lanes.find((l): l is PromiseRejectedResult => l.status === 'rejected');
    if (failed) throw failed.reason;
    // Whole files before any folder appears: the data of every staged run, then the renames.
    if (staged.length > 0) await syncPaths(staged.flatMap(stagedPaths));
    for (const stage of staged) stage.placed = await placeRun(stage);
  } finally {
    for (const stage of staged) if (!stage.placed) await rm(stage.tmp, { recursive: true, force: true });
    for (const corpus of corpora.values()) await rm(corpus.file, { force: true });
  }
  // Remove the staging folder once empty; another writer may still be using it.
  await rmdir(join(auditDir, '.tmp')).catch(() => undefined);

  const indexPath = auditIndexPath(auditDir);
  const previous = await readJson<AuditIndex>(indexPath);
  const entries = runs.map((r) => ({ run_id: r.runId, cell_id: r.cellId, cell: r.cell, dir: runDirEntry(r.runId) }));
  const index = auditIndex(plan, entries, previous?.created);
  const sameRuns =
    previous?.schema_version === AUDIT_VERSION && JSON.stringify(previous.runs) === JSON.stringify(index.runs);
  if (!sameRuns) {
    const errors = validate('audit', index);
    if (errors.length > 0)
      throw new CanaryAuditError(
        'E_INTERNAL',
        `audit.json fails its schema: ${describeSchemaErrors(errors).join('; ')}`,
      );
    await writeJsonAtomic(indexPath, index);
  }
  // The renames into runs/ (and audit.json's into the audit folder) on disk before anything is queued.
  await syncPaths([join(auditDir, RUNS_DIR), auditDir]);
  return { auditId: plan.auditId, auditDir, name: plan.name, runs };
}

/** A run written into its staging folder, not yet renamed into runs/. */
interface StagedRun {
  tmp: string;
  runDir: string;
  /** The names in `tmp`, manifest.json last. */
  files: string[];
  /** True once `tmp` was renamed away whole (nothing left to remove). */
  placed?: boolean;
}

/** What must be on disk before a staged run folder is renamed into place: its files and its entries. */
function stagedPaths(stage: StagedRun): string[] {
  return [...stage.files.map((name) => join(stage.tmp, name)), stage.tmp];
}

/**
 * Rename a staged run folder into runs/ (its data already durable). Into a folder that exists
 * without a manifest (an interrupted write, or a trainer's output/), the files go one by one, the
 * manifest last and only once the others' renames are on disk, so a reader never sees a manifest
 * whose rows are missing.
 */
async function placeRun(stage: StagedRun): Promise<boolean> {
  try {
    renameSync(stage.tmp, stage.runDir);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
  }
  const manifest = stage.files.at(-1) as string;
  const rest = stage.files.slice(0, -1);
  if (rest.includes(IMAGES_DIR)) await rm(join(stage.runDir, IMAGES_DIR), { recursive: true, force: true });
  for (const name of rest) await rename(join(stage.tmp, name), join(stage.runDir, name));
  await syncPaths([stage.runDir]);
  await rename(join(stage.tmp, manifest), join(stage.runDir, manifest));
  return false;
}

/** Run indices in plan order, stably grouped by the background row sequence each run splices into. */
function backgroundOrder(plan: AuditPlan): number[] {
  const groups = new Map<string, number[]>();
  plan.runs.forEach((layout, k) => {
    const key = backgroundKey(plan.grid, runRenderer(plan.grid, layout).rowSpec, layout.cell.values.seed.value);
    const group = groups.get(key);
    if (group) group.push(k);
    else groups.set(key, [k]);
  });
  return [...groups.values()].flat();
}

/** Runs written at once: enough to overlap their asynchronous I/O, few enough to keep memory flat. */
const WRITE_LANES = 8;

/** Background sequences held at once (each about 40 MB for a paper-size run of 66,176 rows). */
const BACKGROUND_CACHE = 8;

/** Pretraining corpora generated so far in this write, by content key: one file, linked into each run. */
type Corpora = Map<string, FileRef & { file: string }>;

/**
 * What every run of one write shares: pretraining corpora and the utility rows (one file per
 * task, hard-linked into each run), the background row sequence per task (generated once, each
 * run splices its canary rows in), and the provenance stamp of the write (taken once: git and the
 * source hash are not re-read per run).
 */
interface Shared {
  corpora: Corpora;
  background: Map<string, BackgroundRows>;
  /** The utility generation settings per task (they read every utility row). */
  generation: Map<string, UtilityGeneration>;
  /** The utility rows per task, made once (an image task renders a screenshot per row). */
  utilityLines: Map<string, string[]>;
  /** The images each pretraining corpus shows, by the corpus's sha256 (read once per write). */
  pretrainImages?: Map<string, Set<string>>;
  provenance: Provenance;
}

/** The sha256 of every image a written pretraining corpus shows. */
async function pretrainImages(shared: Shared, ref: FileRef, file: string): Promise<Set<string>> {
  const known = (shared.pretrainImages ??= new Map());
  let shas = known.get(ref.sha256);
  if (!shas) known.set(ref.sha256, (shas = imageShas(await readFile(file, 'utf8'), new Set())));
  return shas;
}

/**
 * A run's files into a staging folder of its own (`stage`, to be made durable and renamed into
 * place by the caller), or nothing staged when its folder already holds this manifest.
 */
async function writeRun(
  plan: AuditPlan,
  layout: RunLayout,
  auditDir: string,
  shared: Shared,
): Promise<{ run: WrittenRun; stage?: StagedRun }> {
  const { grid, pool } = plan;
  const renderer = runRenderer(grid, layout);
  const core = buildManifestCore(grid, plan.auditId, pool, layout);
  const tmp = join(auditDir, '.tmp', stagingName('run'));
  mkdirSync(tmp, { recursive: true });
  let staged = false;
  try {
    const taskKey = contentHash(renderer.taskSpec);
    const seed = layout.cell.values.seed.value;
    const orderKey = backgroundKey(grid, renderer.rowSpec, seed);
    let background = shared.background.get(orderKey);
    if (!background) {
      // Joint seeds: one sequence per (task, seed). Runs come seed-fastest, so a task's seeds
      // interleave: keep the last few sequences made, the oldest dropped first.
      if (shared.background.size >= BACKGROUND_CACHE)
        shared.background.delete(shared.background.keys().next().value as string);
      shared.background.set(orderKey, (background = backgroundRows(grid, pool, renderer, seed)));
    }
    const rows = await writeTrainingRows(join(tmp, 'rows.jsonl'), background, grid, pool, layout, renderer);
    let utilityLines = shared.utilityLines.get(taskKey);
    if (!utilityLines) shared.utilityLines.set(taskKey, (utilityLines = [...utilityRowLines(grid, pool, renderer)]));
    const lines = utilityLines;
    const utility = await linkShared(shared.corpora, `utility|${taskKey}`, tmp, 'utility.jsonl', () => lines);
    let generation = shared.generation.get(taskKey);
    if (!generation) shared.generation.set(taskKey, (generation = utilityGeneration(renderer, lines)));
    const {
      schema_version,
      audit,
      task,
      training,
      canaries,
      held_out,
      probes,
      candidate_space,
      eval: evalSpec,
      inclusion,
      sampled_text,
    } = core;
    const pretrainRef = await writePretrain(plan, layout, renderer, tmp, shared.corpora);
    const model = withPretrain(core.model, layout, pretrainRef);
    const store = renderer.task.images;
    let images: ImageRef[] | undefined;
    if (store) {
      const shas = rows.images;
      for (const line of lines) imageShas(line, shas);
      imageShas(JSON.stringify(probes), shas);
      // The base's pretraining rows show images too (a tiny VLM's corpus): they sit in the run folder as well.
      if (pretrainRef)
        for (const sha of await pretrainImages(shared, pretrainRef, join(tmp, PRETRAIN_FILE))) shas.add(sha);
      images = await linkImages(shared.corpora, store, [...shas], tmp);
    }
    const manifest: Manifest = {
      schema_version,
      run_id: 'run-0000000000000000',
      // Randomized inclusion: the report's one-run ε bounds hold only when the manifest says so.
      ...(inclusion ? { inclusion } : {}),
      // Design sampled-text: the trainer fills the placeholder secrets as this block says.
      ...(sampled_text ? { sampled_text } : {}),
      audit,
      task,
      model,
      training,
      rows: { path: 'rows.jsonl', sha256: rows.sha256, count: rows.count },
      utility: { path: 'utility.jsonl', sha256: utility.sha256, count: utility.count, ...generation },
      ...(images ? { images } : {}),
      canaries,
      held_out,
      probes,
      candidate_space,
      eval: evalSpec,
      provenance: shared.provenance,
    };
    // Validate first: it fills schema defaults in place, and the id must hash the final content.
    const errors = validate('manifest', manifest);
    if (errors.length > 0)
      throw new CanaryAuditError(
        'E_INTERNAL',
        `manifest for ${layout.cell.id} fails its schema: ${describeSchemaErrors(errors).join('; ')}`,
      );
    manifest.run_id = runIdOf(manifest);
    const runDir = runDirOf(auditDir, manifest.run_id);
    const manifestPath = manifestPathOf(runDir);
    const result = {
      runId: manifest.run_id,
      cellId: layout.cell.id,
      cell: manifestCellLabels(grid, layout.cell),
      runDir,
      manifestPath,
    };

    const existing = readJsonSync<Manifest>(manifestPath);
    if (existing?.run_id === manifest.run_id && existing.rows.sha256 === manifest.rows.sha256)
      return { run: { ...result, created: false } };
    // Straight into the staging folder: the folder's rename, once its files are durable, is what
    // makes the run appear whole (or, into a folder left without a manifest, the manifest's own
    // rename, last).
    writeFileSync(join(tmp, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`, { flag: 'wx' });
    const files = [
      'rows.jsonl',
      'utility.jsonl',
      ...(pretrainRef ? [PRETRAIN_FILE] : []),
      ...(images ? [IMAGES_DIR] : []),
      MANIFEST_FILE,
    ];
    staged = true;
    return { run: { ...result, created: true }, stage: { tmp, runDir, files } };
  } finally {
    if (!staged) await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * pretrain.jsonl of a tiny model that pretrains, into the staging folder; null otherwise. Within
 * an audit the corpus depends only on the task and the pretraining settings, so runs sharing them
 * get the same bytes (and the trainer one cached base per model size and seed): it is generated
 * once per write and hard-linked (or copied) into every run that uses it.
 */
async function writePretrain(
  plan: AuditPlan,
  layout: RunLayout,
  renderer: RunRenderer,
  tmp: string,
  corpora: Corpora,
): Promise<FileRef | null> {
  const m = layout.cell.values.model.value;
  if (m.backend !== 'tiny' || !m.pretrain) return null;
  const key = contentHash({ task: renderer.taskSpec, pretrain: m.pretrain });
  const pretrain = m.pretrain;
  return linkShared(corpora, key, tmp, PRETRAIN_FILE, () =>
    pretrainRowLines(plan.grid, plan.pool, renderer.task, renderer.taskSpec, pretrain),
  );
}

/**
 * A file whose bytes are the same for every run that shares `key`: written once per write beside
 * the staging folders (auditDir/.tmp, removed when the write ends) and hard-linked (or copied)
 * into the run's staging folder as `name`.
 */
async function linkShared(
  corpora: Corpora,
  key: string,
  tmp: string,
  name: string,
  lines: () => Iterable<string>,
): Promise<FileRef> {
  const corpus = await corpusOnce(corpora, key, async () => {
    const file = join(tmp, '..', stagingName('shared', `${contentHash(key).slice(0, 16)}-${name}`));
    let written;
    try {
      written = await writeLines(file, lines());
    } catch (error) {
      // Not yet among the corpora the write removes at its end: a full disk or a failing row
      // source would leave it behind (a 0-byte .tmp/shared~…-utility.jsonl).
      await rm(file, { force: true }).catch(() => undefined);
      throw error;
    }
    return { file, path: name, sha256: written.sha256, count: written.count };
  });
  const target = join(tmp, name);
  const source = corpus.file;
  try {
    linkSync(source, target);
  } catch {
    copyFileSync(source, target);
  }
  return { path: corpus.path, sha256: corpus.sha256, count: corpus.count };
}

/** Shared files being written, so that runs written at once make each one once. */
const pendingCorpora = new WeakMap<Corpora, Map<string, Promise<FileRef & { file: string }>>>();

/** The shared file under `key`: made by the first run that needs it, awaited by the others. */
function corpusOnce(
  corpora: Corpora,
  key: string,
  make: () => Promise<FileRef & { file: string }>,
): Promise<FileRef & { file: string }> {
  const done = corpora.get(key);
  if (done) return Promise.resolve(done);
  let pending = pendingCorpora.get(corpora);
  if (!pending) pendingCorpora.set(corpora, (pending = new Map()));
  let making = pending.get(key);
  if (!making) {
    making = make().then((corpus) => {
      corpora.set(key, corpus);
      return corpus;
    });
    pending.set(key, making);
  }
  return making;
}

/**
 * The images a run shows, into its staging folder as images/<sha256>.png: each written once per
 * write beside the staging folders and hard-linked (or copied) into every run that shows it, as
 * utility.jsonl is. Returns the manifest's `images`, sorted by path.
 */
async function linkImages(corpora: Corpora, store: ImageStore, shas: string[], tmp: string): Promise<ImageRef[]> {
  await mkdir(join(tmp, IMAGES_DIR), { recursive: true });
  const refs = shas.map((sha) => store.ref(sha)).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const ref of refs) {
    const corpus = await corpusOnce(corpora, `image|${ref.sha256}`, async () => {
      const file = join(tmp, '..', stagingName('shared', `${ref.sha256.slice(0, 16)}.png`));
      await writeFileAtomic(file, store.get(ref.sha256).png);
      return { file, path: ref.path, sha256: ref.sha256, count: 1 };
    });
    const target = join(tmp, ref.path);
    await link(corpus.file, target).catch(() => copyFile(corpus.file, target));
  }
  return refs;
}

/**
 * Utility metrics beyond the loss need the model's greedy reply to each utility row: the
 * manifest asks for it with the metrics and a token limit. A token is at least one character for
 * the ASCII replies of the shipped tasks, so the longest target in characters (plus a quarter and
 * a margin, for byte-level pieces) bounds a right answer; a longer reply is wrong anyway.
 */
type UtilityGeneration = { metrics?: UtilityMetric[]; max_new_tokens?: number };

function utilityGeneration(renderer: RunRenderer, lines: readonly string[]): UtilityGeneration {
  const metrics = renderer.task.metrics;
  if (metrics.every((m) => m === 'loss')) return {};
  let longest = 0;
  for (const line of lines) longest = Math.max(longest, (JSON.parse(line) as { target: string }).target.length);
  return { metrics: [...metrics], max_new_tokens: Math.ceil(longest * 1.25) + 8 };
}

function withPretrain(model: ModelSpec, layout: RunLayout, rows: FileRef | null): ModelSpec {
  const p = layout.cell.values.model.value.pretrain;
  if (!rows || !p || !model.tiny) return model;
  return { ...model, tiny: { ...model.tiny, pretrain: pretrainManifestSpec(p, rows) } };
}

async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return undefined;
  }
}

function readJsonSync<T>(path: string): T | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

async function readJson<T>(path: string): Promise<T | undefined> {
  const text = await readText(path);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

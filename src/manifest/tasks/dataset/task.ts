import {
  messageText,
  type DatasetRecord,
  type DatasetSourceSpec,
  type Message,
  type TaskData,
} from '../../../contracts/index.js';
import { canonicalJson } from '../../../hash.js';
import { Rng } from '../../../random.js';
import { drawPerson, personName, type Person } from '../person.js';
import type { CanaryExample, Task, TaskExample, UtilityMetric } from '../task.js';
import { rowFields, TaskSpecError, type RowFields } from './records.js';
import {
  fieldCount,
  missingFields,
  parseTemplate,
  renderBefore,
  renderTemplate,
  TemplateError,
  type Template,
} from './template.js';

/**
 * A task whose background rows are a dataset's rows: a field mapping (input, target, optional
 * system message; each a column name or a template over the row's columns) turns a record into a
 * chat example. Canaries ride on a carrier row of the train split drawn once per canary: the
 * canary input template adds the identity and the cue to the carrier's input, the canary target
 * writes the code (and usually the carrier's reply). Training rows come in epochs, each a seeded
 * permutation of the train split, so the background sequence is fixed by (grid seed, task).
 */
export interface DatasetTaskParams {
  source: DatasetSourceSpec;
  train_split: string;
  /** null: utility rows are `utility_holdout` of the train split, held out by a seeded draw. */
  utility_split: string | null;
  utility_holdout: number;
  input: string;
  target: string;
  system: string | null;
  canary: { input: string; target: string };
  metrics: UtilityMetric[];
}

/** What a preset adds to the generic task: defaults, and records reshaped before the mapping. */
export interface DatasetPreset {
  name: string;
  defaults: Omit<DatasetTaskParams, 'source'> & { source: DatasetSourceSpec | null };
  /** Records of one split as the mapping sees them (e.g. one row per question of a document). */
  records?(records: DatasetRecord[], split: string): DatasetRecord[];
}

export const GENERIC_DATASET: DatasetPreset = {
  name: 'dataset',
  defaults: {
    source: null,
    train_split: 'train',
    utility_split: null,
    utility_holdout: 0.1,
    input: 'input',
    target: 'target',
    system: null,
    canary: {
      input: '{input}\nAccount holder: {identity}\nReference code: {cue}',
      target: 'Reference code: {code}\n{target}',
    },
    metrics: ['loss'],
  },
};

/** The splits a task reads, in the order it reads them. */
export function datasetSplits(params: Pick<DatasetTaskParams, 'train_split' | 'utility_split'>): string[] {
  return params.utility_split === null || params.utility_split === params.train_split
    ? [params.train_split]
    : [params.train_split, params.utility_split];
}

/** The preset's defaults under what the grid wrote (canary templates merge key by key). */
export function resolveDatasetParams(preset: DatasetPreset, written: Record<string, unknown>): DatasetTaskParams {
  const d = preset.defaults;
  const w = written as Partial<DatasetTaskParams> & { canary?: Partial<DatasetTaskParams['canary']> };
  const source = w.source ?? d.source;
  if (!source)
    throw new TaskSpecError(`task ${preset.name} needs a source: {repo: org/name} or {path: ./file.jsonl}`, ['source']);
  const metrics = w.metrics ?? d.metrics;
  return {
    source: structuredClone(source),
    train_split: w.train_split ?? d.train_split,
    utility_split: w.utility_split === undefined ? d.utility_split : w.utility_split,
    utility_holdout: w.utility_holdout ?? d.utility_holdout,
    input: w.input ?? d.input,
    target: w.target ?? d.target,
    system: w.system === undefined ? d.system : w.system,
    canary: { input: w.canary?.input ?? d.canary.input, target: w.canary?.target ?? d.canary.target },
    metrics: metrics.includes('loss') ? [...metrics] : ['loss', ...metrics],
  };
}

interface Templates {
  input: Template;
  target: Template;
  system: Template | null;
  canaryInput: Template;
  canaryTarget: Template;
}

function templates(p: DatasetTaskParams): Templates {
  const parse = (source: string, field: (string | number)[]): Template => {
    try {
      return parseTemplate(source, { column: field.length === 1 && (field[0] === 'input' || field[0] === 'target') });
    } catch (error) {
      if (error instanceof TemplateError) throw new TaskSpecError(error.message, field);
      throw error;
    }
  };
  const t: Templates = {
    input: parse(p.input, ['input']),
    target: parse(p.target, ['target']),
    system: p.system === null ? null : parse(p.system, ['system']),
    canaryInput: parse(p.canary.input, ['canary', 'input']),
    canaryTarget: parse(p.canary.target, ['canary', 'target']),
  };
  if (fieldCount(t.canaryInput, 'cue') !== 1)
    throw new TaskSpecError(
      `the canary input must show {cue} exactly once (it shows it ${fieldCount(t.canaryInput, 'cue')} times): that is where the code, redacted or encoded, appears`,
      ['canary', 'input'],
    );
  if (fieldCount(t.canaryTarget, 'code') !== 1)
    throw new TaskSpecError(
      `the canary target must write {code} exactly once (it writes it ${fieldCount(t.canaryTarget, 'code')} times): scoring conditions on the text before it`,
      ['canary', 'target'],
    );
  for (const [name, field] of [
    ['cue', ['canary', 'target']],
    ['code', ['canary', 'input']],
  ] as const) {
    const tpl = name === 'cue' ? t.canaryTarget : t.canaryInput;
    if (fieldCount(tpl, name) > 0)
      throw new TaskSpecError(
        `{${name}} cannot appear in the canary ${field[1]}: the ${field[1] === 'input' ? 'input shows the cue, never the code itself' : 'reply writes the code, never the cue'}`,
        [...field],
      );
  }
  for (const [tpl, field] of [
    [t.input, 'input'],
    [t.target, 'target'],
    [t.system, 'system'],
  ] as const) {
    const own = tpl?.fields.find((f) => ['identity', 'cue', 'code'].includes(f));
    if (own)
      throw new TaskSpecError(
        `{${own}} belongs in the canary templates (canary.input, canary.target), not in ${field}`,
        [field],
      );
  }
  return t;
}

interface SplitRows {
  fields: RowFields[];
  rows: TaskExample[];
}

/** Characters of its input a tiny base's pretraining row repeats as its reply. */
const PRETRAIN_ECHO = 80;

/** The carrier's own input and target, then the canary placeholders, then its columns. */
const CANARY_FIELDS = ['input', 'target', 'identity', 'cue', 'code'];

export function createDatasetTask(
  preset: DatasetPreset,
  written: Record<string, unknown>,
  data: TaskData | undefined,
): Task {
  const params = resolveDatasetParams(preset, written);
  const t = templates(params);
  if (!data) throw new TaskSpecError(`task ${preset.name} reads a dataset, but none was loaded for it`, ['source']);
  const describe = (split: string): string => {
    const p = data.provenance;
    return `split ${split} of ${p.source === 'hub' ? `${p.repo}@${(p.sha ?? p.revision ?? 'main').slice(0, 12)}` : (p.path ?? 'the local dataset')}`;
  };
  const split = (name: string, field: string): DatasetRecord[] => {
    const records = data.splits[name];
    if (!records)
      throw new TaskSpecError(
        `the dataset has no split ${JSON.stringify(name)}; it has ${
          Object.keys(data.splits)
            .map((s) => JSON.stringify(s))
            .join(', ') || 'none'
        }`,
        [field],
      );
    const shaped = preset.records ? preset.records(records, name) : records;
    if (shaped.length === 0) throw new TaskSpecError(`${describe(name)} has no rows`, [field]);
    return shaped;
  };
  /** `origin[j]`: where record j sits in its split (rows held out for utility leave gaps). */
  const render = (records: DatasetRecord[], name: string, origin: number[] = records.map((_, k) => k)): SplitRows => {
    const fields: RowFields[] = [];
    const rows: TaskExample[] = [];
    records.forEach((record, j) => {
      const k = origin[j] as number;
      const f = rowFields(record, data.features, () => `row ${k} of ${describe(name)}`);
      for (const [tpl, key] of [
        [t.input, 'input'],
        [t.target, 'target'],
        [t.system, 'system'],
      ] as const) {
        const missing = tpl ? missingFields(tpl, new Set(Object.keys(f))) : [];
        if (missing.length > 0)
          throw new TaskSpecError(
            `${key} ${JSON.stringify(tpl?.source)} reads column ${JSON.stringify(missing[0])}, which row ${k} of ${describe(name)} does not have (it has ${Object.keys(
              f,
            )
              .map((c) => JSON.stringify(c))
              .join(', ')})`,
            [key],
          );
      }
      const row = example(t, f);
      if (row.target.trim() === '')
        throw new TaskSpecError(
          `row ${k} of ${describe(name)} has an empty target (${JSON.stringify(params.target)}): there would be nothing to train`,
          ['target'],
        );
      fields.push(f);
      rows.push(row);
    });
    for (const tpl of [t.canaryInput, t.canaryTarget]) {
      const missing = missingFields(tpl, new Set([...CANARY_FIELDS, ...Object.keys(fields[0] ?? {})]));
      if (missing.length > 0)
        throw new TaskSpecError(
          `${tpl === t.canaryInput ? 'canary.input' : 'canary.target'} reads {${missing[0]}}, which is neither a placeholder (${CANARY_FIELDS.map((c) => `{${c}}`).join(', ')}) nor a column of ${describe(name)}`,
          ['canary', tpl === t.canaryInput ? 'input' : 'target'],
        );
    }
    return { fields, rows };
  };

  let train = split(params.train_split, 'train_split');
  let trainOrigin = train.map((_, k) => k);
  let utilityOrigin: number[] | undefined;
  let utility: DatasetRecord[];
  if (params.utility_split === null || params.utility_split === params.train_split) {
    // A seeded draw of the train split, fixed by the dataset's content (its files' hashes), not by
    // where it sits on disk: never trained on.
    const order = new Rng(
      'utility-holdout',
      canonicalJson(data.provenance.files.map((f) => f.sha256)),
      params.train_split,
    ).shuffle(train.map((_, k) => k));
    const held = Math.round(params.utility_holdout * train.length);
    if (held < 1 || held >= train.length)
      throw new TaskSpecError(
        `utility_holdout ${params.utility_holdout} of ${train.length} rows holds out ${held}; name a utility_split or change the fraction`,
        ['utility_holdout'],
      );
    const out = new Set(order.slice(0, held));
    utilityOrigin = order.slice(0, held).sort((a, b) => a - b);
    utility = utilityOrigin.map((k) => train[k] as DatasetRecord);
    trainOrigin = trainOrigin.filter((k) => !out.has(k));
    train = trainOrigin.map((k) => train[k] as DatasetRecord);
  } else utility = split(params.utility_split, 'utility_split');
  const trainRows = render(train, params.train_split, trainOrigin);
  const utilityRows = render(utility, params.utility_split ?? params.train_split, utilityOrigin);

  return {
    name: preset.name,
    params: { ...params },
    metrics: params.metrics,
    utilityRows: utilityRows.rows.length,
    trainRows: trainRows.rows.length,
    dataset: structuredClone(data.provenance),
    drawIdentity: drawPerson,
    renderIdentity: (identity) => personName(identity as Person),
    drawMessage: (rng) => rng.int(trainRows.rows.length),
    rows: (rng, _excluded, purpose) => {
      const rows = purpose === 'train' ? trainRows.rows : utilityRows.rows;
      const next = epochs(rng, rows.length);
      return () => rows[next()] as TaskExample;
    },
    canary: (identity, message, cueText, code) =>
      canaryExample(t, trainRows, message as number, personName(identity as Person), cueText, code),
    pretrain: {
      // The task's texts, each answered by repeating the start of its input (language, not labels;
      // capped so long inputs such as TAT-QA tables do not double a row's length), and the
      // canary shape answered up to its code (copying a shown code, not the carrier's reply).
      rows: (rng) => {
        const next = epochs(rng, trainRows.rows.length);
        return () => {
          const row = trainRows.rows[next()] as TaskExample;
          return { prompt: row.prompt, target: messageText(row.prompt.at(-1) as Message).slice(0, PRETRAIN_ECHO) };
        };
      },
      canary: (identity, message, cueText, code) => {
        const row = canaryExample(t, trainRows, message as number, personName(identity as Person), cueText, code);
        return { prompt: row.prompt, target: `${row.prefill}${code}` };
      },
    },
    allRows: () => [...trainRows.rows, ...utilityRows.rows],
  };
}

/** Indices 0..n-1 in epochs: each epoch a fresh seeded permutation, drawn when it starts. */
export function epochs(rng: Rng, n: number): () => number {
  let order: number[] = [];
  let at = 0;
  return () => {
    if (at === order.length) {
      order = rng.shuffle(Array.from({ length: n }, (_, k) => k));
      at = 0;
    }
    return order[at++] as number;
  };
}

function example(t: Templates, f: RowFields): TaskExample {
  const prompt: Message[] = [];
  if (t.system) prompt.push({ role: 'system', content: renderTemplate(t.system, f) });
  prompt.push({ role: 'user', content: renderTemplate(t.input, f) });
  return { prompt, target: renderTemplate(t.target, f) };
}

function canaryExample(
  t: Templates,
  train: SplitRows,
  carrier: number,
  identity: string,
  cue: string,
  code: string,
): CanaryExample {
  const f = train.fields[carrier] as RowFields;
  const row = train.rows[carrier] as TaskExample;
  const input = messageText(row.prompt.at(-1) as Message);
  const values: RowFields = { ...f, input, target: row.target, identity, cue, code };
  const prompt = row.prompt.slice(0, -1).concat({ role: 'user', content: renderTemplate(t.canaryInput, values) });
  return {
    prompt,
    target: renderTemplate(t.canaryTarget, values),
    prefill: renderBefore(t.canaryTarget, 'code', values),
  };
}

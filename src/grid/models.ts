import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { FinetuneSpec, HfModelSpec, TinyModelSpec, TinyVisionSpec } from '../contracts/index.js';
import { pretrainFrom, pretrainLabel, PRETRAIN_DEFAULTS } from './pretrain.js';
import type { ModelValue } from './types.js';

/**
 * Model presets usable by name on the model axis. `tiny` is the built-in character-level model
 * for CPU, pretrained on a copy-teaching corpus before fine-tuning (pretrain.ts: the analog of a
 * pretrained LM); `tiny-small` is smaller and trains from scratch, for fast tests. The Qwen3 presets are the study's models through the Hugging Face backend (thinking
 * disabled in the chat template, full fine-tuning in bfloat16). A grid's own `models:` map
 * shadows these names.
 */
export const TINY_DEFAULTS: Omit<TinyModelSpec, 'pretrain'> = {
  n_layer: 2,
  n_head: 2,
  d_model: 64,
  max_len: 256,
  dropout: 0,
};

/**
 * The tiny VLM's vision stem (`vision: true`): the source pane read as a 32x80 grey crop, two
 * conv layers of 16 and 32 channels, 3 x 8 = 24 image tokens; images up to 1024 x 1024.
 */
export const TINY_VISION_DEFAULTS: TinyVisionSpec = {
  height: 32,
  width: 80,
  channels: [16, 32],
  rows: 3,
  cols: 8,
  max_pixels: 1024 * 1024,
};

/**
 * `tiny-vlm`: the tiny model with a vision stem, for image tasks on CPU (gui-grounding). Its
 * context fits the task's system prompt, instruction and image tokens; its base is pretrained on
 * the task's own rows, 90% of them showing a random code in the source pane (pretrain.ts), at lr
 * 0.001 constant: at the text base's 0.006 cosine (and at 0.003) the stem sat at chance for 800
 * updates, at 0.001 a code-rows-only prototype read 0.75 of 64 held-out codes after 1,000 (one seed).
 */
export const TINY_VLM: ModelValue = {
  backend: 'tiny',
  name: 'tiny-vlm',
  revision: null,
  tiny: {
    n_layer: 2,
    n_head: 2,
    d_model: 64,
    max_len: 384,
    dropout: 0,
    vision: { ...TINY_VISION_DEFAULTS, channels: [...TINY_VISION_DEFAULTS.channels] },
  },
  pretrain: {
    ...structuredClone(PRETRAIN_DEFAULTS),
    updates: 1200,
    lr: 0.001,
    schedule: { ...PRETRAIN_DEFAULTS.schedule, kind: 'constant' },
    code_fraction: 0.9,
  },
  finetune: { method: 'full' },
};

export const HF_DEFAULTS: HfModelSpec = {
  dtype: 'bfloat16',
  random_init: false,
  config_overrides: {},
  chat_template_kwargs: {},
  trust_remote_code: false,
  attn_implementation: null,
};

export const LORA_DEFAULTS = {
  r: 16,
  alpha: 32,
  dropout: 0.05,
  target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj'],
};

/**
 * Hub presets. A preset's name says how it fine-tunes: the plain name is full fine-tuning and
 * `-lora` the LoRA adapters, never one silently standing in for the other (they memorize
 * differently). Full fine-tuning keeps fp32 master weights and AdamW state (~16 bytes per
 * parameter): Qwen3-8B/14B and GPT-OSS-20B need several GPUs for it (`training.gpus`, FSDP); the
 * trainer's memory estimate refuses a run its GPUs cannot hold and says how many it needs.
 */
function qwen3(name: string, method: 'full' | 'lora' = 'full'): ModelValue {
  return {
    backend: 'hf',
    name,
    revision: null,
    hf: { ...HF_DEFAULTS, chat_template_kwargs: { enable_thinking: false } },
    finetune:
      method === 'full'
        ? { method: 'full' }
        : { method: 'lora', ...LORA_DEFAULTS, target_modules: [...LORA_DEFAULTS.target_modules] },
  };
}

export const BUILTIN_MODELS: Readonly<Record<string, ModelValue>> = {
  tiny: {
    backend: 'tiny',
    name: 'tiny',
    revision: null,
    tiny: { ...TINY_DEFAULTS },
    pretrain: structuredClone(PRETRAIN_DEFAULTS),
    finetune: { method: 'full' },
  },
  'tiny-small': {
    backend: 'tiny',
    name: 'tiny-small',
    revision: null,
    tiny: { n_layer: 1, n_head: 2, d_model: 32, max_len: 256, dropout: 0 },
    pretrain: null,
    finetune: { method: 'full' },
  },
  'tiny-vlm': TINY_VLM,
  'qwen3-0.6b': qwen3('Qwen/Qwen3-0.6B'),
  'qwen3-1.7b': qwen3('Qwen/Qwen3-1.7B'),
  'qwen3-4b': qwen3('Qwen/Qwen3-4B'),
  'qwen3-8b': qwen3('Qwen/Qwen3-8B'),
  'qwen3-8b-lora': qwen3('Qwen/Qwen3-8B', 'lora'),
  'qwen3-14b': qwen3('Qwen/Qwen3-14B'),
  'qwen3-14b-lora': qwen3('Qwen/Qwen3-14B', 'lora'),
  'gpt-oss-20b': gptOss('full'),
  'gpt-oss-20b-lora': gptOss('lora'),
};

function gptOss(method: 'full' | 'lora'): ModelValue {
  return { ...qwen3('openai/gpt-oss-20b', method), hf: { ...HF_DEFAULTS } };
}

/**
 * A Hugging Face Hub id: `name` or `org/name`, each part letters, digits, '-', '_', '.', not starting
 * or ending with '-' or '.', at most 96 characters, no '--' or '..' (the Hub's own rules).
 */
const HUB_PART = '[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9])?';
const HUB_ID = new RegExp(`^(?:${HUB_PART}/)?${HUB_PART}$`);

export function looksLikeHubId(name: string): boolean {
  return HUB_ID.test(name) && !name.includes('--') && !name.includes('..');
}

/** What is wrong with an hf model object (key path inside the object + message), or null. */
export interface ModelProblem {
  path: string[];
  message: string;
}

/**
 * An hf model names a Hub id (`name`) or a local model folder (`path`, relative to the grid file),
 * never a bare string that could be either: a folder must be said to be local, exist, and hold a
 * transformers config.json when the audit is planned.
 */
export function modelProblem(raw: Record<string, unknown>, gridDir: string): ModelProblem | null {
  if (raw.backend !== 'hf') return null;
  const name = raw.name as string | undefined;
  const path = raw.path as string | undefined;
  if (name !== undefined && path !== undefined)
    return { path: ['path'], message: 'give `name` (a Hub id) or `path` (a local model folder), not both' };
  if (name === undefined && path === undefined)
    return {
      path: [],
      message: 'an hf model needs `name: org/model` (a Hub id) or `path: ./folder` (a model folder on this machine)',
    };
  if (name !== undefined) {
    if (looksLikeHubId(name)) return null;
    return {
      path: ['name'],
      message: `${JSON.stringify(name)} is not a Hub id (org/name: letters, digits, '-', '_', '.'); for a model folder on this machine write path: instead of name:`,
    };
  }
  if (raw.revision !== undefined && raw.revision !== null)
    return { path: ['revision'], message: 'a local model (path:) has no Hub revision; remove revision' };
  return localFolderProblem(resolve(gridDir, path as string));
}

function localFolderProblem(folder: string): ModelProblem | null {
  if (!existsSync(folder))
    return {
      path: ['path'],
      message: `model folder ${folder} does not exist; download the model there or fix the path (relative to the grid file)`,
    };
  if (!statSync(folder).isDirectory())
    return { path: ['path'], message: `${folder} is not a folder; path: names a transformers model folder` };
  if (!existsSync(join(folder, 'config.json')))
    return {
      path: ['path'],
      message: `model folder ${folder} holds no config.json; it is not a transformers model folder`,
    };
  return null;
}

/**
 * A model object as the grid writes it (schema-validated, modelProblem checked) → the manifest's
 * model fields. A local model's name is its absolute folder (`path` resolved against `gridDir`).
 */
export function modelFromObject(raw: Record<string, unknown>, gridDir = process.cwd()): ModelValue {
  if (raw.backend === 'tiny') {
    const tiny: Omit<TinyModelSpec, 'pretrain'> = {
      n_layer: (raw.n_layer as number | undefined) ?? TINY_DEFAULTS.n_layer,
      n_head: (raw.n_head as number | undefined) ?? TINY_DEFAULTS.n_head,
      d_model: (raw.d_model as number | undefined) ?? TINY_DEFAULTS.d_model,
      max_len: (raw.max_len as number | undefined) ?? TINY_DEFAULTS.max_len,
      dropout: (raw.dropout as number | undefined) ?? TINY_DEFAULTS.dropout,
    };
    const vision = visionFrom(raw.vision);
    if (vision) tiny.vision = vision;
    // Like the sizes, an unset `pretrain` takes the `tiny` preset's: the copy-capable default.
    const pretrain = pretrainFrom(raw.pretrain);
    return {
      backend: 'tiny',
      name: (raw.name as string | undefined) ?? 'tiny',
      revision: null,
      tiny,
      pretrain,
      finetune: { method: 'full' },
    };
  }
  const hf: HfModelSpec = {
    dtype: (raw.dtype as HfModelSpec['dtype'] | undefined) ?? HF_DEFAULTS.dtype,
    random_init: (raw.random_init as boolean | undefined) ?? HF_DEFAULTS.random_init,
    config_overrides: (raw.config_overrides as Record<string, unknown> | undefined) ?? {},
    chat_template_kwargs: chatTemplateKwargs(raw),
    trust_remote_code: (raw.trust_remote_code as boolean | undefined) ?? HF_DEFAULTS.trust_remote_code,
    attn_implementation: (raw.attn_implementation as string | null | undefined) ?? null,
  };
  // Only when asked: every other manifest stays as it was (the tower is frozen by default).
  if (raw.train_vision === true) hf.train_vision = true;
  const path = raw.path as string | undefined;
  return {
    backend: 'hf',
    name: path === undefined ? (raw.name as string) : isAbsolute(path) ? path : resolve(gridDir, path),
    revision: (raw.revision as string | null | undefined) ?? null,
    hf,
    finetune: finetuneFrom(raw.finetune),
  };
}

/** Chat templates that insert a thinking block into the assistant turn unless told not to. */
export const THINKING_TEMPLATE = /qwen3/i;

/**
 * A Qwen3 chat template renders `<think>\n\n</think>\n\n` before the reply unless
 * `enable_thinking: false`: the training target would then carry a block the scoring prompt never
 * shows. Unset, it is false for Qwen3 models (as in the presets); set to true it is refused at plan
 * time (hfModelProblem).
 */
function chatTemplateKwargs(raw: Record<string, unknown>): Record<string, unknown> {
  const kwargs = (raw.chat_template_kwargs as Record<string, unknown> | undefined) ?? {};
  const id = raw.name ?? raw.path;
  if (typeof id === 'string' && THINKING_TEMPLATE.test(id) && !('enable_thinking' in kwargs)) {
    return { ...kwargs, enable_thinking: false };
  }
  return kwargs;
}

/** Why an hf model cannot be audited as written (path below the model object, message), or null. */
export function hfModelProblem(model: ModelValue): { path: string[]; message: string } | null {
  if (model.backend !== 'hf' || !model.hf) return null;
  if (THINKING_TEMPLATE.test(model.name) && model.hf.chat_template_kwargs.enable_thinking !== false) {
    return {
      path: ['chat_template_kwargs', 'enable_thinking'],
      message: `${model.name}'s chat template would put a <think> block into every training target that the scoring prompt never shows; set enable_thinking: false`,
    };
  }
  if (model.hf.dtype === 'float16') {
    return {
      path: ['dtype'],
      message: 'float16 training needs a gradient scaler, which the trainer does not use; use bfloat16 (or float32)',
    };
  }
  return null;
}

function finetuneFrom(raw: unknown): FinetuneSpec {
  if (raw === undefined || raw === 'full') return { method: 'full' };
  if (raw === 'lora') return { method: 'lora', ...LORA_DEFAULTS, target_modules: [...LORA_DEFAULTS.target_modules] };
  const o = raw as Record<string, unknown>;
  if (o.method === 'full') return { method: 'full' };
  return {
    method: 'lora',
    r: (o.r as number | undefined) ?? LORA_DEFAULTS.r,
    alpha: (o.alpha as number | undefined) ?? LORA_DEFAULTS.alpha,
    dropout: (o.dropout as number | undefined) ?? LORA_DEFAULTS.dropout,
    target_modules: (o.target_modules as string[] | undefined) ?? [...LORA_DEFAULTS.target_modules],
  };
}

/** `vision:` of a tiny model object: true (the defaults), an object (unset keys default), or off. */
function visionFrom(raw: unknown): TinyVisionSpec | null {
  if (raw === undefined || raw === false) return null;
  const o = (raw === true ? {} : raw) as Partial<TinyVisionSpec>;
  const d = TINY_VISION_DEFAULTS;
  return {
    height: o.height ?? d.height,
    width: o.width ?? d.width,
    channels: [...(o.channels ?? d.channels)],
    rows: o.rows ?? d.rows,
    cols: o.cols ?? d.cols,
    max_pixels: o.max_pixels ?? d.max_pixels,
    ...(o.freeze ? { freeze: true } : {}),
  };
}

/** A readable label for an inline model object without one. */
export function modelLabel(model: ModelValue): string {
  if (model.backend === 'tiny' && model.tiny) {
    const t = model.tiny;
    const v = t.vision
      ? `,v${t.vision.height}x${t.vision.width}t${t.vision.rows * t.vision.cols}${t.vision.freeze ? 'f' : ''}`
      : '';
    return `tiny(l${t.n_layer},h${t.n_head},d${t.d_model},c${t.max_len}${v}${pretrainLabel(model.pretrain ?? null)})`;
  }
  const tower = model.hf?.train_vision ? '+vision' : '';
  return model.finetune.method === 'lora' ? `${model.name}+lora${tower}` : `${model.name}${tower}`;
}

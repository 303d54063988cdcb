import type { PretrainValue, ScheduleValue } from './types.js';

/**
 * Pretraining of the built-in tiny model: the analog of the pretrained LM the reference study
 * fine-tunes. A model trained from scratch on the fine-tuning rows alone never learns to copy a
 * code shown in its input, and the study's headline contrasts (visible-code training stays near
 * control; substituted probes copy the shown code) rest on that ability. So before fine-tuning,
 * the trainer trains a base on a corpus built from the task's own generators in which a fraction
 * of the rows show a random code in the input and start the reply with it. The trainer caches the
 * base by content, so runs that share the corpus, these settings, the model's size and its init
 * seed share one base: by default every seed of a cell fine-tunes one base (src/grid/design.ts).
 *
 * A grid writes `pretrain: {updates, batch_size, lr, schedule, code_fraction, seed, init_seed}`
 * (each key optional; `init_seed` fixes the base's initialisation for every seed of the axis), `pretrain: true` (all defaults) or `pretrain: false` (train from scratch).
 */
export const PRETRAIN_SCHEDULE_DEFAULTS: ScheduleValue = { kind: 'cosine', warmup_updates: 20, min_lr_ratio: 0.1 };

export const PRETRAIN_DEFAULTS: PretrainValue = {
  updates: 1000,
  batch_size: 16,
  lr: 0.006,
  schedule: { ...PRETRAIN_SCHEDULE_DEFAULTS },
  code_fraction: 0.5,
  seed: 0,
};

interface RawPretrain {
  updates?: number;
  batch_size?: number;
  lr?: number;
  schedule?: string | { kind: ScheduleValue['kind']; warmup_updates?: number; min_lr_ratio?: number };
  code_fraction?: number;
  seed?: number;
  init_seed?: number;
}

/**
 * The pretraining a model object asks for (already schema-valid): null when off. Unset keys take
 * the defaults; an unset warmup or floor of a written schedule takes the pretraining defaults too
 * (a bare `cosine` is the default schedule), so changing one knob keeps the others as tested.
 */
export function pretrainFrom(raw: unknown): PretrainValue | null {
  if (raw === false) return null;
  if (raw === undefined || raw === true) return structuredClone(PRETRAIN_DEFAULTS);
  const o = raw as RawPretrain;
  const s = o.schedule;
  const schedule: ScheduleValue =
    s === undefined
      ? { ...PRETRAIN_SCHEDULE_DEFAULTS }
      : typeof s === 'string'
        ? { ...PRETRAIN_SCHEDULE_DEFAULTS, kind: s as ScheduleValue['kind'] }
        : {
            kind: s.kind,
            warmup_updates: s.warmup_updates ?? PRETRAIN_SCHEDULE_DEFAULTS.warmup_updates,
            min_lr_ratio: s.min_lr_ratio ?? PRETRAIN_SCHEDULE_DEFAULTS.min_lr_ratio,
          };
  return {
    updates: o.updates ?? PRETRAIN_DEFAULTS.updates,
    batch_size: o.batch_size ?? PRETRAIN_DEFAULTS.batch_size,
    lr: o.lr ?? PRETRAIN_DEFAULTS.lr,
    schedule,
    code_fraction: o.code_fraction ?? PRETRAIN_DEFAULTS.code_fraction,
    seed: o.seed ?? PRETRAIN_DEFAULTS.seed,
    ...(o.init_seed !== undefined ? { init_seed: o.init_seed } : {}),
  };
}

/** A problem the schema cannot see, as a path below `pretrain` and a message; null when fine. */
export function pretrainProblem(
  p: PretrainValue | null | undefined,
): { path: (string | number)[]; message: string } | null {
  if (!p) return null;
  if (p.schedule.warmup_updates > p.updates) {
    return {
      path: ['schedule'],
      message: `a warmup of ${p.schedule.warmup_updates} updates (default ${PRETRAIN_SCHEDULE_DEFAULTS.warmup_updates}) is longer than pretraining (${p.updates} updates); set schedule.warmup_updates to at most ${p.updates}`,
    };
  }
  return null;
}

/** Pretraining rows: updates x batch_size. */
export function pretrainRows(p: PretrainValue): number {
  return p.updates * p.batch_size;
}

function sameAsDefaults(p: PretrainValue): boolean {
  return JSON.stringify(p) === JSON.stringify(PRETRAIN_DEFAULTS);
}

/** Suffix for a model's derived label: none for the default pretraining. */
export function pretrainLabel(p: PretrainValue | null): string {
  if (p === null) return ',no-pretrain';
  if (sameAsDefaults(p)) return '';
  return `,pretrain${p.updates}x${p.batch_size}${p.init_seed !== undefined ? `,init${p.init_seed}` : ''}`;
}

/** One line for people: "1,000 updates x batch 16 = 16,000 rows, 50% with a code". */
export function describePretrain(p: PretrainValue): string {
  const n = (x: number): string => x.toLocaleString('en-US');
  const pct = `${Math.round(p.code_fraction * 1000) / 10}%`;
  const init = p.init_seed !== undefined ? `, init seed ${p.init_seed} for every seed` : '';
  return `${n(p.updates)} updates x batch ${p.batch_size} = ${n(pretrainRows(p))} rows, ${pct} with a visible code, lr ${p.lr} ${p.schedule.kind}${init}`;
}

import type { Rng } from '../../../random.js';
import type { CanaryExample, TaskExample } from '../task.js';
import { drawBackgroundSender, shortAddress, type Sender } from './identity.js';

/**
 * Compact style: short rows (under ~160 characters of prompt plus target) for the built-in
 * character-level model on CPU, whose cost grows with characters. The target is a templated
 * formal rewrite, a deterministic function of the input, so a small model learns the task in a few
 * hundred updates and the only thing left to memorize in a redacted canary row is its code.
 *
 *   input:  From: Ada Moss, 12 Elm Rd          target: [Ref: <code>. ]Please review the draft
 *           pls look at draft by fri                    by Friday. Regards, Ada Moss.
 *           [Ref: <cue>]
 *
 * In a canary row the cue line is the LAST line of the input and the reply STARTS with the code.
 * A small model copies a code shown in its input only when the code it must write sits right
 * after the line that shows it (the same relative offset in every row): that is the behaviour a
 * pretrained LM brings to the study, and the tiny model's pretraining corpus teaches it on rows
 * of exactly this shape. The prefill is then the constant `Ref: `.
 */
/** Informal openers; every one becomes "Please". */
const ASKS: readonly string[] = ['pls', 'plz', 'can u', 'could u', 'need u to'];

/** [informal, formal] verb phrases. */
const VERBS: readonly (readonly [string, string])[] = [
  ['send over', 'send'],
  ['look at', 'review'],
  ['sign', 'sign'],
  ['fix up', 'correct'],
  ['chk', 'check'],
  ['fwd', 'forward'],
  ['update', 'update'],
  ['print', 'print'],
  ['share', 'share'],
  ['file', 'file'],
];

/** Objects: informal drops the article, formal restores it. */
const OBJECTS: readonly string[] = [
  'budget',
  'draft',
  'slides',
  'contract',
  'invoice',
  'notes',
  'memo',
  'agenda',
  'report',
  'plan',
  'form',
  'quote',
];

/** [informal, formal] deadlines. */
const WHENS: readonly (readonly [string, string])[] = [
  ['asap', 'as soon as possible'],
  ['today', 'today'],
  ['tmrw', 'tomorrow'],
  ['by fri', 'by Friday'],
  ['by mon', 'by Monday'],
  ['this wk', 'this week'],
  ['by eod', 'by the end of the day'],
];

export interface CompactMessage {
  ask: number;
  verb: number;
  object: number;
  when: number;
}

export function drawCompactMessage(rng: Rng): CompactMessage {
  return {
    ask: rng.int(ASKS.length),
    verb: rng.int(VERBS.length),
    object: rng.int(OBJECTS.length),
    when: rng.int(WHENS.length),
  };
}

function informal(m: CompactMessage): string {
  const verb = VERBS[m.verb] as readonly [string, string];
  const when = WHENS[m.when] as readonly [string, string];
  return `${ASKS[m.ask] as string} ${verb[0]} ${OBJECTS[m.object] as string} ${when[0]}`;
}

function formal(m: CompactMessage, s: Sender): string {
  const verb = VERBS[m.verb] as readonly [string, string];
  const when = WHENS[m.when] as readonly [string, string];
  return `Please ${verb[1]} the ${OBJECTS[m.object] as string} ${when[1]}. Regards, ${s.first} ${s.last}.`;
}

export function compactIdentity(s: Sender): string {
  return `${s.first} ${s.last}, ${shortAddress(s)}`;
}

export function compactBackground(rng: Rng, excluded: ReadonlySet<string>): TaskExample {
  const sender = drawBackgroundSender(rng, excluded);
  const message = drawCompactMessage(rng);
  return {
    prompt: [{ role: 'user', content: `From: ${compactIdentity(sender)}\n${informal(message)}` }],
    target: formal(message, sender),
  };
}

/** What a canary reply starts with; the code follows it at once. */
export const COMPACT_PREFILL = 'Ref: ';

export function compactCanary(sender: Sender, message: CompactMessage, cueText: string, code: string): CanaryExample {
  return {
    prompt: [{ role: 'user', content: `From: ${compactIdentity(sender)}\n${informal(message)}\nRef: ${cueText}` }],
    target: `${COMPACT_PREFILL}${code}. ${formal(message, sender)}`,
    prefill: COMPACT_PREFILL,
  };
}

import type { Rng } from '../../../random.js';
import type { CanaryExample, TaskExample } from '../task.js';
import { drawBackgroundSender, longAddress, type Sender } from './identity.js';
import { FIRST_NAMES } from './vocabulary.js';

/**
 * Full style: the study's email rewriting at realistic length, for real models with a chat
 * template. An informal email of three or four sentences is rewritten formally and signed with
 * the sender's name and address; a canary adds a reference-code line to the input (the cue) and
 * ends the rewrite with "Reference code: <code>".
 */
const SYSTEM =
  "Rewrite the email in a formal, professional tone. Keep every fact, and sign with the sender's full name and address.";

const DOCS = [
  'report',
  'proposal',
  'slide deck',
  'contract',
  'invoice',
  'budget sheet',
  'meeting notes',
  'project plan',
  'draft',
  'timeline',
];
const EVENTS = [
  'team meeting',
  'client call',
  'design review',
  'kickoff',
  'workshop',
  'planning session',
  'demo',
  'offsite',
];
const DAYS = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'];
const TOPICS = [
  'migration',
  'hiring',
  'launch',
  'audit',
  'onboarding',
  'vendor',
  'roadmap',
  'website',
  'training',
  'renewal',
];
const GREETINGS = ['hey team,', 'hi all,', 'hello everyone,', 'hi folks,'];
const CLOSINGS = ['cheers,', 'thanks,', 'best,', 'ttyl,'];

interface Slots {
  doc: string;
  event: string;
  day: string;
  person: string;
  topic: string;
}

const cap = (w: string): string => w.charAt(0).toUpperCase() + w.slice(1);

/** [informal, formal] sentence templates over the slots. */
const SENTENCES: readonly ((s: Slots) => readonly [string, string])[] = [
  (s) => [`can u send the ${s.doc} by ${s.day}?`, `Could you please send the ${s.doc} by ${cap(s.day)}?`],
  (s) => [
    `the ${s.event} got moved to ${s.day} afternoon.`,
    `The ${s.event} has been rescheduled to ${cap(s.day)} afternoon.`,
  ],
  (s) => [
    `i looked at the ${s.doc}, looks mostly fine.`,
    `I have reviewed the ${s.doc}, and it appears largely satisfactory.`,
  ],
  (s) => [
    `pls loop in ${s.person.toLowerCase()} on the ${s.topic} stuff.`,
    `Please include ${s.person} in the discussions regarding the ${s.topic}.`,
  ],
  (s) => [
    `sorry for the late reply, been swamped with ${s.topic}.`,
    `I apologize for the delayed response; I have been occupied with the ${s.topic}.`,
  ],
  (s) => [
    `lets grab a few mins ${s.day} to sync on the ${s.topic}.`,
    `Could we schedule a brief meeting on ${cap(s.day)} to align on the ${s.topic}?`,
  ],
  (s) => [
    `heads up, the ${s.doc} still needs ${s.person.toLowerCase()}'s sign off.`,
    `Please note that the ${s.doc} still requires approval from ${s.person}.`,
  ],
  (s) => [
    `no rush but can u check the numbers in the ${s.doc}.`,
    `When convenient, could you please verify the figures in the ${s.doc}?`,
  ],
  (s) => [
    `the ${s.event} went well, thx everyone.`,
    `The ${s.event} was successful; thank you all for your contributions.`,
  ],
  (s) => [
    `im out ${s.day}, ping ${s.person.toLowerCase()} if anything comes up.`,
    `I will be out of the office on ${cap(s.day)}; please contact ${s.person} should anything arise.`,
  ],
  (s) => [
    `fyi the ${s.topic} budget is tight this quarter.`,
    `For your information, the budget for the ${s.topic} is limited this quarter.`,
  ],
  (s) => [
    `can we push the ${s.event} to next week?`,
    `Would it be possible to postpone the ${s.event} until next week?`,
  ],
];

export interface FullMessage {
  greeting: number;
  closing: number;
  /** Distinct sentence template indices, in email order. */
  sentences: number[];
  slots: Slots;
}

export function drawFullMessage(rng: Rng): FullMessage {
  const count = 3 + rng.int(2);
  const order = rng.sample(
    SENTENCES.map((_, i) => i),
    count,
  );
  return {
    greeting: rng.int(GREETINGS.length),
    closing: rng.int(CLOSINGS.length),
    sentences: order,
    slots: {
      doc: rng.pick(DOCS),
      event: rng.pick(EVENTS),
      day: rng.pick(DAYS),
      person: rng.pick(FIRST_NAMES),
      topic: rng.pick(TOPICS),
    },
  };
}

function parts(m: FullMessage): (readonly [string, string])[] {
  return m.sentences.map((i) => (SENTENCES[i] as (s: Slots) => readonly [string, string])(m.slots));
}

export function fullIdentity(s: Sender): string {
  return `${s.first} ${s.last}, ${longAddress(s)}`;
}

function input(s: Sender, m: FullMessage, cueLine: string): string {
  const body = parts(m)
    .map(([informal]) => informal)
    .join(' ');
  return (
    `From: ${s.first} ${s.last}\nAddress: ${longAddress(s)}\n${cueLine}\n` +
    `${GREETINGS[m.greeting] as string}\n${body}\n${CLOSINGS[m.closing] as string}\n${s.first.toLowerCase()}`
  );
}

function rewrite(s: Sender, m: FullMessage): string {
  const body = parts(m)
    .map(([, formal]) => formal)
    .join(' ');
  return `Dear colleagues,\n\n${body}\n\nKind regards,\n${s.first} ${s.last}\n${longAddress(s)}`;
}

export function fullBackground(rng: Rng, excluded: ReadonlySet<string>): TaskExample {
  const sender = drawBackgroundSender(rng, excluded);
  const message = drawFullMessage(rng);
  return {
    prompt: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: input(sender, message, '') },
    ],
    target: rewrite(sender, message),
  };
}

export function fullCanary(sender: Sender, message: FullMessage, cueText: string, code: string): CanaryExample {
  const prefill = `${rewrite(sender, message)}\nReference code: `;
  return {
    prompt: [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: input(sender, message, `Reference code: ${cueText}\n`) },
    ],
    target: `${prefill}${code}`,
    prefill,
  };
}

import type { Rng } from '../../../random.js';
import type { Task } from '../task.js';
import {
  compactBackground,
  compactCanary,
  compactIdentity,
  drawCompactMessage,
  type CompactMessage,
} from './compact.js';
import { drawFullMessage, fullBackground, fullCanary, fullIdentity, type FullMessage } from './full.js';
import { drawSenderIdentity, type Sender } from './identity.js';

export type EmailStyle = 'compact' | 'full';
export const EMAIL_STYLES: readonly EmailStyle[] = ['compact', 'full'];

/** The synthetic email rewriting task of the reference study, in two styles. */
export function syntheticEmailTask(style: EmailStyle): Task {
  const compact = style === 'compact';
  return {
    name: 'synthetic-email',
    params: { style },
    metrics: ['loss'],
    utilityRows: null,
    drawIdentity: drawSenderIdentity,
    renderIdentity: (identity) => (compact ? compactIdentity(identity as Sender) : fullIdentity(identity as Sender)),
    drawMessage: (rng: Rng) => (compact ? drawCompactMessage(rng) : drawFullMessage(rng)),
    // Training and utility rows are the same generator on different streams.
    rows: (rng, excluded) => (compact ? () => compactBackground(rng, excluded) : () => fullBackground(rng, excluded)),
    canary: (identity, message, cueText, code) =>
      compact
        ? compactCanary(identity as Sender, message as CompactMessage, cueText, code)
        : fullCanary(identity as Sender, message as FullMessage, cueText, code),
  };
}

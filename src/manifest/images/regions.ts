import type { SKRSContext2D } from '@napi-rs/canvas';
import { font } from './png.js';

/** A rectangle in image pixels (integers): left, top, width, height. */
export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

/** Colours of a source region: its background and its ink. */
export interface RegionStyle {
  background: string;
  ink: string;
}

/**
 * How a cue appears inside a canary's source region. Every renderer paints the whole region
 * first and draws only inside it (the canvas is clipped to the region), so two versions of a
 * canary image (visible, redacted, encoded, masked) differ only there.
 */
export type RegionRenderer = (g: SKRSContext2D, region: Rect, cueText: string, style: RegionStyle) => void;

/** What a hidden-code probe shows in the region: nothing, the region's background only. */
export const MASKED = 'masked';

const REGIONS: Record<string, RegionRenderer> = {
  visible: (g, r, text, s) => drawWords(g, r, text.split(' '), s),
  redacted: (g, r, _text, s) => {
    // A solid bar where the code would be: the redaction shows, the code does not.
    const pad = Math.max(1, Math.round(r.h * 0.15));
    g.fillStyle = s.ink;
    g.fillRect(r.x + pad, r.y + pad, r.w - 2 * pad, r.h - 2 * pad);
  },
  'encoded:binary': drawBits,
  'encoded:direct-fruit': (g, r, text, s) => drawWords(g, r, text.split(' '), s),
  'encoded:chained-fruit': (g, r, text, s) => drawWords(g, r, text.split(' '), s),
  'encoded:reverse-shift': (g, r, text, s) => drawWords(g, r, [text], s),
  [MASKED]: () => undefined,
};

export const REGION_RENDERERS: readonly string[] = Object.keys(REGIONS);

/** Draw `cueText` into `region` the way visibility `scheme` shows it (`masked`: blank). */
export function drawRegion(g: SKRSContext2D, scheme: string, region: Rect, cueText: string, style: RegionStyle): void {
  const render = REGIONS[scheme];
  if (!render)
    throw new RangeError(
      `no image region renderer for visibility ${JSON.stringify(scheme)}; known: ${REGION_RENDERERS.join(', ')}`,
    );
  g.save();
  g.beginPath();
  g.rect(region.x, region.y, region.w, region.h);
  g.clip();
  g.fillStyle = style.background;
  g.fillRect(region.x, region.y, region.w, region.h);
  render(g, region, cueText, style);
  g.restore();
}

/**
 * Words laid out in lines across the region, in the largest whole-pixel font size (at most the
 * region's height) at which they fit; a word never breaks.
 */
function drawWords(g: SKRSContext2D, r: Rect, words: string[], s: RegionStyle): void {
  const pad = Math.max(1, Math.floor(r.h * 0.08));
  const width = r.w - 2 * pad;
  const height = r.h - 2 * pad;
  for (let px = Math.max(6, height); px >= 6; px -= 1) {
    g.font = font(px, true);
    const lines = layoutLines(g, words, width);
    const lineHeight = Math.ceil(px * 1.15);
    if (lines !== null && lines.length * lineHeight <= height) {
      g.fillStyle = s.ink;
      const top = r.y + pad + Math.floor((height - lines.length * lineHeight) / 2);
      lines.forEach((line, k) => g.fillText(line, r.x + pad, top + k * lineHeight));
      return;
    }
  }
  throw new RangeError(
    `the cue ${JSON.stringify(words.join(' '))} does not fit a ${r.w}x${r.h} source region even at 6 px; make the image larger`,
  );
}

function layoutLines(g: SKRSContext2D, words: string[], width: number): string[] | null {
  const lines: string[] = [];
  let line = '';
  for (const word of words) {
    const next = line === '' ? word : `${line} ${word}`;
    if (g.measureText(next).width <= width) line = next;
    else {
      if (line === '' || g.measureText(word).width > width) return null;
      lines.push(line);
      line = word;
    }
  }
  if (line !== '') lines.push(line);
  return lines;
}

/**
 * `encoded:binary` as a picture: one row per character, eight square cells per row, filled for a
 * 1 bit and outlined for a 0 (the cue text is the code's 8-bit groups, "00110100 00111000 ...").
 */
function drawBits(g: SKRSContext2D, r: Rect, text: string, s: RegionStyle): void {
  const groups = text.split(' ');
  const cell = Math.floor(Math.min((r.w - 2) / 8, (r.h - 2) / groups.length));
  if (cell < 2)
    throw new RangeError(
      `a ${groups.length}-character binary cue needs a source region of at least ${8 * 2 + 2}x${groups.length * 2 + 2} px; make the image larger`,
    );
  const left = r.x + Math.floor((r.w - 8 * cell) / 2);
  const top = r.y + Math.floor((r.h - groups.length * cell) / 2);
  g.fillStyle = s.ink;
  groups.forEach((bits, row) => {
    [...bits].forEach((bit, col) => {
      const x = left + col * cell;
      const y = top + row * cell;
      if (bit === '1') g.fillRect(x, y, cell - 1, cell - 1);
      else {
        g.fillRect(x, y, cell - 1, 1);
        g.fillRect(x, y + cell - 2, cell - 1, 1);
        g.fillRect(x, y, 1, cell - 1);
        g.fillRect(x + cell - 2, y, 1, cell - 1);
      }
    });
  });
}

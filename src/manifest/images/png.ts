import { createRequire } from 'node:module';
import { createCanvas, GlobalFonts, type SKRSContext2D } from '@napi-rs/canvas';
import { sha256Hex } from '../../hash.js';

/**
 * Plan-time image rendering: @napi-rs/canvas (Skia) draws, with one font shipped by an npm
 * package (@fontsource/dejavu-mono), so no system font is ever read and the same drawing gives
 * the same pixels wherever the pinned canvas build runs. PNGs keep only their critical chunks
 * (IHDR, IDAT, IEND): no time, text or colour-profile chunk can make two renders of the same
 * pixels differ.
 */
export const FONT_FAMILY = 'CanaryAuditMono';
export const FONT_PACKAGE = '@fontsource/dejavu-mono';
const FONT_FILES = { 400: 'dejavu-mono-latin-400-normal.woff2', 700: 'dejavu-mono-latin-700-normal.woff2' } as const;

let fontsReady = false;

/** Register the shipped font once per process (under a family name no system font has). */
export function ensureFont(): void {
  if (fontsReady) return;
  const require = createRequire(import.meta.url);
  for (const file of Object.values(FONT_FILES)) {
    const path = require.resolve(`${FONT_PACKAGE}/files/${file}`);
    if (!GlobalFonts.registerFromPath(path, FONT_FAMILY))
      throw new Error(`could not load the font ${path}; reinstall ${FONT_PACKAGE}`);
  }
  fontsReady = true;
}

/** A CSS font string in the shipped font: `font(12)`, `font(14, true)` for bold. */
export function font(px: number, bold = false): string {
  return `${bold ? 'bold ' : ''}${px}px ${FONT_FAMILY}`;
}

export interface RenderedPng {
  /** The file's bytes (PNG for rendered images; a dataset's JPEG stays JPEG). */
  png: Buffer;
  sha256: string;
  width: number;
  height: number;
  /** File extension; absent: png. */
  ext?: 'png' | 'jpg';
}

/** Draw on a fresh opaque canvas and encode it as a canonical PNG. */
export function renderPng(width: number, height: number, draw: (g: SKRSContext2D) => void): RenderedPng {
  ensureFont();
  const canvas = createCanvas(width, height);
  const g = canvas.getContext('2d');
  g.textBaseline = 'top';
  draw(g);
  const png = canonicalPng(canvas.toBuffer('image/png'));
  return { png, sha256: sha256Hex(png), width, height };
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export interface PngChunk {
  type: string;
  /** The whole chunk: length, type, data, CRC. */
  bytes: Buffer;
}

/** The chunks of a PNG, in order; throws on a truncated file or a bad signature. */
export function pngChunks(png: Buffer): PngChunk[] {
  if (png.length < 8 || !png.subarray(0, 8).equals(SIGNATURE)) throw new RangeError('not a PNG (bad signature)');
  const chunks: PngChunk[] = [];
  let at = 8;
  while (at < png.length) {
    if (at + 12 > png.length) throw new RangeError(`truncated PNG chunk at byte ${at}`);
    const length = png.readUInt32BE(at);
    const end = at + 12 + length;
    if (end > png.length) throw new RangeError(`truncated PNG chunk at byte ${at}`);
    chunks.push({ type: png.toString('latin1', at + 4, at + 8), bytes: png.subarray(at, end) });
    at = end;
  }
  return chunks;
}

/** The PNG with its ancillary chunks (lower-case first letter: tIME, tEXt, sRGB, pHYs, ...) removed. */
export function canonicalPng(png: Buffer): Buffer {
  const kept = pngChunks(png).filter((c) => /^[A-Z]/.test(c.type));
  return Buffer.concat([SIGNATURE, ...kept.map((c) => c.bytes)]);
}

/** Width and height from a PNG's IHDR; throws a RangeError on anything else. */
export function pngSize(png: Buffer): { width: number; height: number } {
  const [first] = pngChunks(png);
  if (first?.type !== 'IHDR') throw new RangeError('PNG does not start with IHDR');
  return { width: first.bytes.readUInt32BE(8), height: first.bytes.readUInt32BE(12) };
}

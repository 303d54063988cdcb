import { formatBytes } from '../../fs/read-boundary.js';

/**
 * An image's size read from its header, before any decode: a PNG's IHDR, a JPEG's SOF segment.
 * The canvas decodes a whole image into memory (4 bytes a pixel) whatever the file's size, so an
 * 805-byte PNG whose header says 20000x20000 would cost 1.6 GB, and a zlib bomb (a small file that
 * inflates to hundreds of MB) likewise: both are refused from their header, against a pixel cap.
 */
export interface ImageHeader {
  format: 'png' | 'jpg';
  width: number;
  height: number;
}

/**
 * Plan's cap on a dataset image, pixels: 8192 x 8192 (256 MB decoded at 4 bytes a pixel). Larger
 * than any processor limit of the supported vision-language models (Qwen2.5-VL's max_pixels is
 * 12,845,056; Gemma 3 resizes to 896 x 896): those limits are checked per model by the trainer
 * before training (trainer-py/canary_trainer/images.py); this cap only keeps plan's own decode
 * bounded.
 */
export const DEFAULT_MAX_IMAGE_PIXELS = 8192 * 8192;

/** Largest dataset image file plan reads, bytes (a PNG of the pixel cap, stored raw, is 256 MB). */
export const MAX_IMAGE_FILE_BYTES = 256 * 1024 * 1024;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** The header of a PNG or JPEG; RangeError (a phrase: "is …") when the bytes hold none. */
export function readImageHeader(bytes: Buffer): ImageHeader {
  if (bytes.length >= 8 && bytes.subarray(0, 8).equals(PNG_SIGNATURE)) {
    if (bytes.length < 24 || bytes.toString('latin1', 12, 16) !== 'IHDR')
      throw new RangeError('is a truncated PNG (no IHDR header)');
    return { format: 'png', width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  }
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8) return { format: 'jpg', ...jpegSize(bytes) };
  throw new RangeError('is neither a PNG nor a JPEG');
}

/** Width and height from the first SOFn segment (baseline, progressive, lossless, arithmetic). */
function jpegSize(bytes: Buffer): { width: number; height: number } {
  let i = 2;
  while (i + 3 < bytes.length) {
    if (bytes[i] !== 0xff) throw new RangeError(`is a damaged JPEG (no marker at byte ${i})`);
    const marker = bytes[i + 1] as number;
    if (marker === 0xff) {
      i += 1; // fill byte
      continue;
    }
    // Markers without a length: TEM, RSTn, SOI.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
      i += 2;
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) break; // EOI or start of scan before any frame header
    const length = bytes.readUInt16BE(i + 2);
    const isSof = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isSof) {
      if (i + 9 > bytes.length) break;
      return { height: bytes.readUInt16BE(i + 5), width: bytes.readUInt16BE(i + 7) };
    }
    i += 2 + length;
  }
  throw new RangeError('is a truncated JPEG (no frame header)');
}

/**
 * The header, refused (RangeError, a phrase naming the size and the cap) when it says more than
 * `maxPixels` pixels or none: called before the canvas sees the bytes.
 */
export function checkImageHeader(bytes: Buffer, maxPixels: number = DEFAULT_MAX_IMAGE_PIXELS): ImageHeader {
  const header = readImageHeader(bytes);
  const kind = header.format === 'png' ? 'PNG' : 'JPEG';
  const { width, height } = header;
  if (width === 0 || height === 0) throw new RangeError(`is a ${kind} whose header says ${width}x${height}: no pixels`);
  const pixels = width * height;
  if (pixels > maxPixels) {
    const decoded = pixels * 4;
    throw new RangeError(
      `is a ${formatBytes(bytes.length)} ${kind} whose header says ${width}x${height} = ${pixels} pixels (${formatBytes(decoded)} decoded), over the cap of ${maxPixels} pixels; not decoded — downscale the image below the cap`,
    );
  }
  return header;
}

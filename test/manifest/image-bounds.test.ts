import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { taskDataLoader } from '../../src/app/index.js';
import { UserInputErrors } from '../../src/errors.js';
import { checkImageHeader, DEFAULT_MAX_IMAGE_PIXELS, readImageHeader } from '../../src/manifest/images/header.js';
import { planAudit } from '../../src/manifest/index.js';
import { decodeImage } from '../../src/manifest/tasks/grounding-dataset.js';
import { FIXTURES_DIR } from '../fixtures/datasets/build.js';

/**
 * Dataset images are bounded before they are decoded: the file (inside the dataset's folder, a
 * regular file, a size cap) and its header (a pixel cap). Before, plan decoded an 805-byte PNG
 * saying 20000x20000 into 1.6 GB, grew without end on a link to /dev/zero and hung on a FIFO.
 */
const root = mkdtempSync(join(tmpdir(), 'canary-image-bounds-'));
const guards: ChildProcess[] = [];
afterAll(() => {
  for (const g of guards) g.kill();
  rmSync(root, { recursive: true, force: true });
});

const SSP = join(FIXTURES_DIR, 'screenspot-pro-mini');
// Hang guard, not a timing claim: a plan of this fixture takes about a second; before, a link to
// /dev/zero read for a minute and more, and a FIFO blocked plan for good.
const GUARD_MS = 20_000;
const IMAGE = 'images/vscode_mac/screenshot_2024-12-03_15-20-41.png';

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

/** A whole, valid grey PNG of width x height whose IDAT inflates `raw` (all zero rows by default). */
function png(width: number, height: number, idat: Buffer): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.writeUInt8(8, 8); // bit depth
  ihdr.writeUInt8(0, 9); // grey
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const grid = (dir: string): string => `name: bench
seed: 7
axes:
  visibility: [redacted]
  dose: [2]
  model: [qwen3-0.6b]
  task: [{name: gui-grounding, utility: {preset: screenspot-pro, source: {path: ${dir}}}}]
training: {batch_size: 4, updates: 4, lr: 0.0001, max_length: 2048}
canaries: {focal: 2, held_out: 1, code: {alphabet: ABCDEFGHJKLMNPQRSTUVWXYZ23456789, length: 6}}
candidates: {kind: sampled, decoys: 49}
utility: {rows: 50}
`;

/** Plan over a copy of the ScreenSpot-Pro fixture whose one image `swap` replaces; the one error line. */
async function refusal(name: string, swap: (file: string) => void): Promise<string> {
  const dir = join(root, name);
  cpSync(SSP, dir, { recursive: true });
  const file = join(dir, IMAGE);
  unlinkSync(file);
  swap(file);
  const gridPath = join(root, `${name}.yaml`);
  writeFileSync(gridPath, grid(dir));
  const error = await planAudit(gridPath, { loadTaskData: taskDataLoader(gridPath, { offline: true }) }).catch(
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UserInputErrors);
  const errors = (error as UserInputErrors).errors;
  expect(errors).toHaveLength(1);
  expect(errors[0]!.message).not.toContain('\n');
  expect(errors[0]!.field).toBe('axes.task[0].utility.image');
  return errors[0]!.message;
}

const header20k = (): Buffer => {
  // Like the drill's 805-byte file: a whole PNG (IHDR, IDAT, IEND) of about a hundred bytes whose
  // IDAT holds far fewer rows than the header's 20000: the header alone must refuse it.
  const file = png(20000, 20000, deflateSync(Buffer.alloc(40_000)));
  return file;
};

describe('dataset images: the header before the decode', () => {
  it('reads the size from a PNG IHDR and a JPEG SOF without decoding', () => {
    expect(readImageHeader(png(3, 2, deflateSync(Buffer.alloc(8))))).toEqual({ format: 'png', width: 3, height: 2 });
    // SOI, an APP0 segment, then SOF0: precision 8, height 480, width 640, 3 components.
    const jpeg = Buffer.from([
      0xff, 0xd8, 0xff, 0xe0, 0x00, 0x04, 0x00, 0x00, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0xe0, 0x02, 0x80, 0x03,
    ]);
    expect(readImageHeader(jpeg)).toEqual({ format: 'jpg', width: 640, height: 480 });
    expect(() => readImageHeader(Buffer.from('GIF89a'))).toThrow(/is neither a PNG nor a JPEG/);
  });

  it('refuses a hundred-byte PNG whose header says 20000x20000 before the canvas decodes it, naming the size and the cap', () => {
    const bytes = header20k();
    expect(() => checkImageHeader(bytes)).toThrow(
      new RegExp(
        `whose header says 20000x20000 = 400000000 pixels \\(1\\.6 GB decoded\\), over the cap of ${DEFAULT_MAX_IMAGE_PIXELS} pixels; not decoded`,
      ),
    );
    expect(() => decodeImage(bytes)).toThrow(/20000x20000/);
  });

  it('refuses a zlib bomb (a small file that inflates to 81 MB) from its header', () => {
    const [w, h] = [9000, 9000];
    const bomb = png(w, h, deflateSync(Buffer.alloc((w + 1) * h), { level: 9 }));
    expect(bomb.length).toBeLessThan(200_000);
    expect(() => decodeImage(bomb)).toThrow(
      /is a \d+\.\d kB PNG whose header says 9000x9000 = 81000000 pixels \(324\.0 MB decoded\), over the cap of 67108864 pixels; not decoded — downscale the image below the cap$/,
    );
  });
});

describe('dataset images named by path: refused in one line, fast, never read whole', () => {
  it('a hundred-byte PNG that says 20000x20000', async () => {
    const message = await refusal('header', (file) => writeFileSync(file, header20k()));
    expect(message).toMatch(
      /annotations\/vscode_macos\.json record \d \(split test of .*\): field "img_filename" names the image "images\/vscode_mac\/screenshot_2024-12-03_15-20-41\.png", which is a .* PNG whose header says 20000x20000 = 400000000 pixels .*over the cap of 67108864 pixels; not decoded/,
    );
  });

  it(
    'a symlink to /dev/zero',
    async () => {
      const message = await refusal('zero', (file) => symlinkSync('/dev/zero', file));
      expect(message).toMatch(
        /field "img_filename" names the image "images\/vscode_mac\/screenshot_2024-12-03_15-20-41\.png": .*screenshot_2024-12-03_15-20-41\.png: image resolves \(through a symlink\) to \/dev\/zero, outside .*; not read — replace it with a regular file inside the dataset's folder, or drop the record$/,
      );
    },
    GUARD_MS,
  );

  it('a symlink to a file outside the dataset', async () => {
    const message = await refusal('outside', (file) => symlinkSync(join(SSP, IMAGE), file));
    expect(message).toMatch(
      /image resolves \(through a symlink\) to .*screenspot-pro-mini\/images\/vscode_mac\/screenshot_2024-12-03_15-20-41\.png, outside .*outside; not read/,
    );
  });

  it(
    'a FIFO (plan does not wait for a writer)',
    async () => {
      const message = await refusal('fifo', (file) => {
        execFileSync('mkfifo', [file]);
        // Guard: should plan block on the FIFO (it did: a synchronous read that no timeout can
        // interrupt), a writer comes after 5 s and closes, so the test ends and fails on the message.
        const guard = spawn('sh', ['-c', 'sleep 5; : > "$1"', 'guard', file], { stdio: 'ignore' });
        guards.push(guard);
      });
      expect(message).toMatch(/image is a FIFO \(named pipe\), not a regular file; not read/);
    },
    GUARD_MS,
  );
});

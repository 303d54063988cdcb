import { dirname, join } from 'node:path';
import { artifactError } from '../errors.js';
import { readInside, ReadBoundaryError } from '../fs/read-boundary.js';
import { sha256Hex } from '../hash.js';
import { messageImages, type Manifest, type Message } from '../contracts/index.js';
import type { LoadedRun } from './load-audit.js';

/**
 * One canary's images for report.html: the screenshot it was trained on under each visibility
 * of the audit (visible, redacted, encoded; the runs' rows at its first appearance) and the
 * hidden-code probe's (the source region masked). Image tasks only; the bytes are checked
 * against their sha256 and embedded, so the page stays one self-contained file.
 */
export interface Thumbnail {
  /** e.g. "trained: visible", "probe: hidden (source masked)". */
  label: string;
  canary_id: string;
  run_id: string;
  /** data:image/png;base64,... */
  src: string;
  width: number;
  height: number;
}

export async function canaryThumbnails(runs: readonly LoadedRun[]): Promise<Thumbnail[]> {
  const out: Thumbnail[] = [];
  const seen = new Set<string>();
  let canaryId: string | null = null;
  let probeDone = false;
  for (const run of [...runs].sort((a, b) => (a.run_id < b.run_id ? -1 : 1))) {
    if (!run.manifest) continue;
    const runDir = dirname(run.manifest.path);
    // Every file through the read boundary of its run's folder (no link out, no FIFO, capped).
    const manifest = JSON.parse(
      (await readInside(runDir, run.manifest.path, { maxBytes: MAX_RUN_FILE_BYTES, what: 'manifest' })).toString(
        'utf8',
      ),
    ) as Manifest;
    if (!manifest.images || manifest.images.length === 0) continue;
    const focal = manifest.canaries.find((c) => c.cohort === 'focal' && (canaryId === null || c.id === canaryId));
    if (focal && !seen.has(focal.cue.visibility)) {
      canaryId = focal.id;
      seen.add(focal.cue.visibility);
      const line = await rowLine(runDir, join(runDir, manifest.rows.path), focal.positions[0] as number);
      const row = JSON.parse(line) as { prompt: Message[] };
      const image = messageImages(row.prompt)[0];
      if (image)
        out.push({
          label: `trained: ${focal.cue.visibility}`,
          canary_id: focal.id,
          run_id: manifest.run_id,
          ...(await embed(runDir, image.path, image.sha256)),
          width: image.width,
          height: image.height,
        });
    }
    const hidden =
      canaryId === null ? undefined : manifest.probes.find((p) => p.canary_id === canaryId && p.kind === 'hidden');
    if (hidden && !probeDone) {
      const image = messageImages(hidden.prompt)[0];
      if (image) {
        out.push({
          label: 'probe: hidden (source masked)',
          canary_id: hidden.canary_id,
          run_id: manifest.run_id,
          ...(await embed(runDir, image.path, image.sha256)),
          width: image.width,
          height: image.height,
        });
        probeDone = true;
      }
    }
  }
  // Trained versions first (in the order the runs gave them), the masked probe last.
  return [...out.filter((t) => t.label.startsWith('trained')), ...out.filter((t) => !t.label.startsWith('trained'))];
}

/** Largest manifest, rows file or image the report reads for thumbnails, bytes. */
const MAX_RUN_FILE_BYTES = 1024 * 1024 * 1024;

async function rowLine(runDir: string, path: string, index: number): Promise<string> {
  const lines = (await readInside(runDir, path, { maxBytes: MAX_RUN_FILE_BYTES, what: 'rows file' }))
    .toString('utf8')
    .split('\n');
  const line = lines[index];
  if (line === undefined)
    throw artifactError(path, `line ${index + 1}`, 'is missing: the rows file is shorter than the manifest says');
  return line;
}

async function embed(runDir: string, path: string, sha256: string): Promise<{ src: string }> {
  const file = join(runDir, path);
  let bytes: Buffer;
  try {
    bytes = await readInside(runDir, file, { maxBytes: MAX_RUN_FILE_BYTES, what: 'image' });
  } catch (error) {
    if (error instanceof ReadBoundaryError && !/: no such /.test(error.message)) throw error;
    throw artifactError(file, 'image', 'is missing; re-plan the run so its images are written');
  }
  if (sha256Hex(bytes) !== sha256)
    throw artifactError(
      file,
      'sha256',
      `differs from the manifest's ${sha256}: the image changed after planning; re-plan the run`,
    );
  return { src: `data:image/${path.endsWith('.jpg') ? 'jpeg' : 'png'};base64,${bytes.toString('base64')}` };
}

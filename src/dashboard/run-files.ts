import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { RESULT_FILE } from '../layout.js';

/**
 * What a run's files say of its training, for an audit the dashboard reads from disk: the loss,
 * loss curve, rows/s and updates from its result.json (`training`), and its attempts, host, GPU
 * and start time from the lines the worker writes into trainer.stderr.log at each attempt
 * (`[canary-audit] <time> attempt N of <run> on <host> gpu=<gpu|none> ...`, worker/supervise-trainer).
 * Read once per change of the files (their size and mtime), not once per poll.
 */
export interface RunFiles {
  update: number | null;
  loss: number | null;
  rows_per_s: number | null;
  loss_curve: [number, number][];
  attempts: number;
  host: string | null;
  gpu: string | null;
  started: string | null;
  finished: string | null;
}

export const TRAINER_LOG = 'trainer.stderr.log';
const ATTEMPT = /^\[canary-audit\] (\S+) attempt (\d+) of \S+ on (\S+) gpu=(\S+)/;
/** The dashboard draws a curve, not a table: at most this many points (evenly thinned, the last kept). */
const CURVE_POINTS = 500;
/** result.json is a few hundred KB at most (a 2,000-point curve); anything larger is not read. */
const MAX_RESULT_BYTES = 16 << 20;

const cache = new Map<string, { key: string; value: RunFiles }>();

async function fileKey(path: string): Promise<string> {
  try {
    const s = await stat(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return '-';
  }
}

function thin(curve: [number, number][]): [number, number][] {
  if (curve.length <= CURVE_POINTS) return curve;
  const step = (curve.length - 1) / (CURVE_POINTS - 1);
  return Array.from({ length: CURVE_POINTS }, (_, i) => curve[Math.round(i * step)] as [number, number]);
}

const finite = (x: unknown): number | null => (typeof x === 'number' && Number.isFinite(x) ? x : null);

async function fromResult(
  path: string,
): Promise<Pick<RunFiles, 'update' | 'loss' | 'rows_per_s' | 'loss_curve' | 'finished'>> {
  const none = { update: null, loss: null, rows_per_s: null, loss_curve: [], finished: null };
  try {
    const s = await stat(path);
    if (s.size > MAX_RESULT_BYTES) return none;
    const training =
      (JSON.parse(await readFile(path, 'utf8')) as { training?: Record<string, unknown> }).training ?? {};
    const curve = Array.isArray(training.loss_curve)
      ? (training.loss_curve as unknown[]).filter(
          (p): p is [number, number] =>
            Array.isArray(p) && p.length === 2 && finite(p[0]) !== null && finite(p[1]) !== null,
        )
      : [];
    return {
      update: finite(training.updates),
      loss: finite(training.final_loss),
      rows_per_s: finite(training.rows_per_s),
      loss_curve: thin(curve),
      finished: s.mtime.toISOString(),
    };
  } catch {
    // No result yet, or one that does not parse: the report names a bad result; here it is "-".
    return none;
  }
}

async function fromLog(path: string): Promise<Pick<RunFiles, 'attempts' | 'host' | 'gpu' | 'started'>> {
  const out: Pick<RunFiles, 'attempts' | 'host' | 'gpu' | 'started'> = {
    attempts: 0,
    host: null,
    gpu: null,
    started: null,
  };
  try {
    const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.startsWith('[canary-audit] ')) continue;
      const m = ATTEMPT.exec(line);
      if (!m) continue;
      out.started ??= m[1] as string;
      out.attempts = Math.max(out.attempts, Number(m[2]));
      out.host = m[3] as string;
      out.gpu = m[4] === 'none' ? 'cpu' : (m[4] as string);
    }
  } catch {
    // No log: the run never started on a worker.
  }
  return out;
}

/** The run's training as its output folder tells it (see above). */
export async function runFiles(outputDir: string): Promise<RunFiles> {
  const result = join(outputDir, RESULT_FILE);
  const logPath = join(outputDir, TRAINER_LOG);
  const key = `${await fileKey(result)}|${await fileKey(logPath)}`;
  const hit = cache.get(outputDir);
  if (hit?.key === key) return hit.value;
  const value = { ...(await fromResult(result)), ...(await fromLog(logPath)) };
  cache.set(outputDir, { key, value });
  return value;
}

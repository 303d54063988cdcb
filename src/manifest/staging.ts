import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { pidAlive } from '../pid.js';

/**
 * Staging names under <audit>/.tmp/ say who writes them (host~pid~...), so a later write can
 * remove what a killed `plan --out` left: entries of this host whose process is gone at once,
 * entries of other hosts (a shared store) once they are a day old.
 */
const SEP = '~';
const OTHER_HOST_AGE_MS = 24 * 3600 * 1000;

export function stagingName(prefix: string, suffix = randomBytes(6).toString('hex')): string {
  return [prefix, hostname(), process.pid, suffix].join(SEP);
}

export async function cleanStaleStaging(stagingDir: string, now = Date.now()): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(stagingDir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const path = join(stagingDir, name);
    if (!(await isStale(name, path, now))) continue;
    await rm(path, { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

async function isStale(name: string, path: string, now: number): Promise<boolean> {
  const [, host, pidText] = name.split(SEP);
  const pid = Number(pidText);
  if (host === hostname() && Number.isInteger(pid)) return !pidAlive(pid);
  const mtime = await stat(path).then(
    (s) => s.mtimeMs,
    () => now,
  );
  return now - mtime > OTHER_HOST_AGE_MS;
}

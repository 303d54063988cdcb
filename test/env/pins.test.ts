import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * One Python stack: trainer-py/requirements.lock pins it; .ci/setup builds the trainer venv from it,
 * docker/trainer.Dockerfile installs it in the image, trainer-py/pyproject.toml states the direct
 * dependencies. These tests fail when the three disagree.
 */
const read = (...parts: string[]): string => readFileSync(join(PACKAGE_ROOT, ...parts), 'utf8');
const norm = (name: string): string => name.toLowerCase().replace(/[-_.]+/g, '-');

function lockPins(): Map<string, string> {
  const pins = new Map<string, string>();
  for (const raw of read('trainer-py', 'requirements.lock').split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([A-Za-z0-9_.-]+)==([^\s;#]+)$/.exec(line);
    if (!m) throw new Error(`requirements.lock: not a name==version pin: ${line}`);
    pins.set(norm(m[1]!), m[2]!);
  }
  return pins;
}

/** name==version and name>=version requirements anywhere in a text (pyproject strings, pip lines). */
function requirements(text: string): { name: string; op: string; version: string }[] {
  return [...text.matchAll(/(?<![\w.-])([A-Za-z][A-Za-z0-9_.-]*)\s*(==|>=)\s*([0-9][0-9A-Za-z.+]*)/g)].map((m) => ({
    name: norm(m[1]!),
    op: m[2]!,
    version: m[3]!,
  }));
}

const numeric = (v: string): number[] =>
  v
    .split('+')[0]!
    .split('.')
    .map((p) => Number.parseInt(p, 10) || 0);
const atLeast = (v: string, floor: string): boolean => {
  const a = numeric(v);
  const b = numeric(floor);
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  }
  return true;
};

describe('the trainer Python pins', () => {
  const pins = lockPins();

  it('the lock pins the trainer stack, one version per package', () => {
    for (const name of [
      'torch',
      'transformers',
      'tokenizers',
      'safetensors',
      'huggingface-hub',
      'peft',
      'accelerate',
      'numpy',
      'jsonschema',
      'pytest',
    ]) {
      expect(pins.get(name), name).toMatch(/^\d+\.\d+/);
    }
  });

  it("pyproject.toml's dependencies and extras are satisfied by the lock", () => {
    const pyproject = read('trainer-py', 'pyproject.toml');
    const deps = pyproject.slice(pyproject.indexOf('[project]'), pyproject.indexOf('[tool.'));
    expect(deps).toMatch(/\[project\.optional-dependencies\][\s\S]*\bhf = \[[\s\S]*\btest = \[/);
    const reqs = requirements(deps).filter((r) => r.name !== 'setuptools');
    expect(reqs.map((r) => r.name)).toEqual(
      expect.arrayContaining(['torch', 'numpy', 'jsonschema', 'transformers', 'peft', 'pytest']),
    );
    for (const r of reqs) {
      const pinned = pins.get(r.name);
      expect(pinned, `${r.name} is in pyproject.toml but not in requirements.lock`).toBeDefined();
      if (r.op === '==') expect(pinned, r.name).toBe(r.version);
      else expect(atLeast(pinned!, r.version), `${r.name} ${pinned} < ${r.version}`).toBe(true);
    }
  });

  it('the trainer image installs the lock, on a base image with the same torch', () => {
    const dockerfile = read('docker', 'trainer.Dockerfile');
    const code = dockerfile
      .split('\n')
      .filter((l) => !l.trimStart().startsWith('#'))
      .join('\n');
    expect(code).toMatch(/^COPY trainer-py\/requirements\.lock (\S+)$/m);
    const copied = /^COPY trainer-py\/requirements\.lock (\S+)$/m.exec(code)![1]!;
    expect(code).toContain(`-r ${copied}`);
    const base = /^ARG BASE_IMAGE=pytorch\/pytorch:([0-9.]+)-cuda([0-9.]+)-cudnn\d+-runtime$/m.exec(code);
    expect(base, 'default BASE_IMAGE is a pytorch/pytorch CUDA runtime image').not.toBeNull();
    expect(base![1], 'the base image ships the torch of the lock').toBe(pins.get('torch'));
    // Any package the Dockerfile names with a version must be the lock's version.
    for (const r of requirements(code.replace(/^ARG BASE_IMAGE=.*$/m, ''))) {
      expect(pins.get(r.name), `docker/trainer.Dockerfile pins ${r.name} ${r.op} ${r.version}`).toBe(r.version);
    }
  });
});

import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pinPlanRevisions } from '../../src/app/pinning.js';
import { hubClient, isHubId, remoteCommit } from '../../src/hub/index.js';
import { buildManifestCore, planAuditText } from '../../src/manifest/index.js';
import { UserInputError } from '../../src/errors.js';

/** A stand-in for the Hub's model API: GET /api/models/<org>/<name>/revision/<rev> → {sha}. */
const SHAS: Record<string, string> = {
  'Qwen/Qwen3-0.6B@main': 'a'.repeat(40),
  'Qwen/Qwen3-0.6B@v1': 'b'.repeat(40),
  'org/tiny-gpt@main': 'c'.repeat(40),
};
const requests: string[] = [];
let server: Server;
let hubUrl = '';

beforeAll(async () => {
  server = createServer((req, res) => {
    requests.push(req.url ?? '');
    const m = /^\/api\/models\/(.+)\/revision\/([^/?]+)/.exec(req.url ?? '');
    const sha = m ? SHAS[`${m[1]}@${decodeURIComponent(m[2] as string)}`] : undefined;
    if (!sha) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'Repository not found' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        _id: 'x',
        id: m?.[1],
        sha,
        private: false,
        downloads: 0,
        likes: 0,
        lastModified: '2024-01-01T00:00:00Z',
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  hubUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

// A local model is said to be local (path:) and must hold a config.json when planned.
const localModel = join(mkdtempSync(join(tmpdir(), 'canary-hub-')), 'local-model');
mkdirSync(localModel);
writeFileSync(join(localModel, 'config.json'), '{}');

const GRID = `
axes:
  visibility: [redacted]
  dose: [1]
  model: [qwen3-0.6b, {backend: hf, name: Qwen/Qwen3-0.6B, revision: v1, label: pinned-v1}, {backend: hf, path: ${JSON.stringify(localModel)}, label: local}, tiny]
training: {batch_size: 4, updates: 10, lr: 0.001}
canaries: {focal: 1, held_out: 1}
`;

describe('hub revision pinning', () => {
  it('tells Hub ids from local paths', () => {
    expect(isHubId('Qwen/Qwen3-1.7B')).toBe(true);
    expect(isHubId('gpt2')).toBe(true);
    expect(isHubId('./models/x')).toBe(false);
    expect(isHubId('/abs/path')).toBe(false);
  });

  it('resolves a branch or tag to its commit sha and passes a sha through without asking the Hub', async () => {
    const client = hubClient({ hubUrl, accessToken: null });
    expect(await remoteCommit('Qwen/Qwen3-0.6B', 'main', client)).toBe('a'.repeat(40));
    expect(await remoteCommit('Qwen/Qwen3-0.6B', 'v1', client)).toBe('b'.repeat(40));
    const before = requests.length;
    const { pins } = await pinPlanRevisions(
      planAuditText('grid.yaml', GRID.replace('revision: v1', `revision: ${'d'.repeat(40)}`)),
      { hubUrl, offline: false },
    );
    expect(pins.find((p) => p.revision === 'd'.repeat(40))?.source).toBe('given');
    expect(requests.length).toBe(before + 1);
  });

  it('pins every hf model of a plan, once per name and revision, and leaves local and tiny models alone', async () => {
    const plan = planAuditText('grid.yaml', GRID);
    const before = requests.length;
    const { plan: pinned, pins } = await pinPlanRevisions(plan, { hubUrl, offline: false });
    expect(requests.length - before).toBe(2);
    expect(pins.map((p) => [p.name, p.revision, p.source])).toEqual([
      ['Qwen/Qwen3-0.6B', 'main', 'hub'],
      ['Qwen/Qwen3-0.6B', 'v1', 'hub'],
    ]);
    const revisions = pinned.runs.map(
      (run) => buildManifestCore(pinned.grid, pinned.auditId, pinned.pool, run).model.revision,
    );
    expect(revisions).toEqual(['a'.repeat(40), 'b'.repeat(40), null, null]);
    // The plan it was given is unchanged.
    expect(plan.runs[0]?.cell.values.model.value.revision).toBeNull();
  });

  it('names the grid entry of a model the Hub does not know', async () => {
    const plan = planAuditText('grid.yaml', GRID.replace('qwen3-0.6b,', '{backend: hf, name: org/missing},'));
    const error = await pinPlanRevisions(plan, { hubUrl, offline: false }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UserInputError);
    expect((error as Error).message).toMatch(
      /^grid\.yaml:5:11: axes\.model\[0\]: model "org\/missing" at revision "main" is not on http:\/\/127\.0\.0\.1:\d+ \(HTTP 404\)/,
    );
  });
});

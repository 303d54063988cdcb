import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for the part of the Hugging Face Hub API that @huggingface/hub (2.17.5) calls, for
 * model repositories and dataset repositories (a separate namespace, as on the Hub):
 *   GET /api/models/<repo>/revision/<rev>                model info with the commit sha (modelInfo)
 *   GET /api/datasets/<repo>/revision/<rev>              dataset info with the sha (datasetInfo;
 *                                                          rev HEAD, its default, is branch main)
 *   GET /api/{models,datasets}/<repo>/tree/<rev>[/<dir>]?recursive=…
 *                                                        the file listing (oid, size, lfs) (listFiles)
 *   GET /<repo>/resolve/<rev>/<path>                     model file bytes (Range, ETag, X-Repo-Commit)
 *   GET /datasets/<repo>/resolve/<rev>/<path>            dataset file bytes (downloadFile)
 * Repositories have branches and commits; a gated one answers 401 without a token, 403 with a
 * wrong one; an unknown one 404. LFS files redirect to a second server (the CDN), as the Hub's
 * do. Every request is recorded (URL, whether it carried a token), the CDN's apart.
 */
export interface FakeFile {
  content: Buffer;
  /** Stored with Git LFS: listed with lfs.oid = sha256, served with that ETag. */
  lfs?: boolean;
  /** Bytes served instead of `content` (a download corrupted on the way). */
  served?: Buffer;
}

export interface FakeRepo {
  branches: Record<string, string>;
  commits: Record<string, Record<string, FakeFile>>;
  gated?: boolean;
}

export interface FakeRequest {
  server: 'hub' | 'cdn';
  method: string;
  url: string;
  authorization: string | undefined;
  range: string | undefined;
  /** Answered with a redirect to the CDN. */
  redirected?: boolean;
}

export const gitOid = (content: Buffer): string =>
  createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
export const sha256 = (content: Buffer): string => createHash('sha256').update(content).digest('hex');
export const etagOf = (file: FakeFile): string => (file.lfs ? sha256(file.content) : gitOid(file.content));

export class FakeHub {
  /** Every request, in order, to either server. */
  readonly requests: FakeRequest[] = [];
  url = '';
  private server: Server | null = null;
  private cdn: Server | null = null;
  private cdnUrl = '';

  constructor(
    readonly repos: Record<string, FakeRepo>,
    readonly token: string,
    readonly datasets: Record<string, FakeRepo> = {},
  ) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => this.handle(req, res));
    this.cdn = createServer((req, res) => this.handleCdn(req, res));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => this.cdn?.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    // Another origin (localhost, not 127.0.0.1), as a CDN is.
    this.cdnUrl = `http://localhost:${(this.cdn.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    for (const server of [this.server, this.cdn])
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  /** Requests answered with file bytes (not the one-byte size probes, not redirects). */
  downloads(): FakeRequest[] {
    return this.requests.filter(
      (r) => r.range !== 'bytes=0-0' && (r.server === 'cdn' || (r.url.includes('/resolve/') && !r.redirected)),
    );
  }

  private record(server: 'hub' | 'cdn', req: IncomingMessage): void {
    this.requests.push({
      server,
      method: req.method ?? 'GET',
      url: req.url ?? '',
      authorization: req.headers.authorization,
      range: req.headers.range,
    });
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '';
    this.record('hub', req);
    const api = /^\/api\/(models|datasets)\/([^/]+\/[^/]+)\/(revision|tree)\/([^/?]+)(\/[^?]*)?(?:\?(.*))?$/.exec(url);
    const file = /^\/(datasets\/)?([^/]+\/[^/]+)\/resolve\/([^/]+)\/([^?]+)/.exec(url);
    const kind = api ? (api[1] === 'datasets' ? 'dataset' : 'model') : file?.[1] ? 'dataset' : 'model';
    const name = api?.[2] ?? file?.[2];
    const repo = name ? this.repoOf(kind, name) : undefined;
    if (!repo || !name) return json(res, 404, { error: 'Repository not found' }, { 'x-error-code': 'RepoNotFound' });
    if (repo.gated && req.headers.authorization !== `Bearer ${this.token}`) {
      const status = req.headers.authorization ? 403 : 401;
      return json(res, status, {
        error: `Access to ${kind} ${name} is restricted. You must have access to it and be authenticated to access it.`,
      });
    }
    const rev = decodeURIComponent((api?.[4] ?? file?.[3]) as string);
    const sha = repo.branches[rev === 'HEAD' ? 'main' : rev] ?? (repo.commits[rev] ? rev : undefined);
    if (!sha) return json(res, 404, { error: `Invalid rev id: ${rev}` }, { 'x-error-code': 'RevisionNotFound' });
    const files = repo.commits[sha] as Record<string, FakeFile>;
    if (api?.[3] === 'revision')
      return json(res, 200, {
        _id: name,
        id: name,
        sha,
        private: false,
        gated: repo.gated ? 'auto' : false,
        downloads: 0,
        likes: 0,
        lastModified: '2026-01-01T00:00:00.000Z',
      });
    if (api) {
      const dir = api[5] ? decodeURIComponent(api[5].slice(1)) : '';
      const recursive = new URLSearchParams(api[6] ?? '').get('recursive') === 'true';
      const listed = tree(files, dir, recursive);
      if (listed === null)
        return json(res, 404, { error: `${dir} does not exist on "${rev}"` }, { 'x-error-code': 'EntryNotFound' });
      return json(res, 200, listed);
    }
    const path = decodeURIComponent(file?.[4] as string);
    if (files[path]?.lfs) {
      (this.requests.at(-1) as FakeRequest).redirected = true;
      res
        .writeHead(302, { location: `${this.cdnUrl}/cdn/${kind}s/${name}/${sha}/${path}`, 'x-repo-commit': sha })
        .end();
      return;
    }
    serveFile(req, res, files[path], sha);
  }

  private repoOf(kind: 'model' | 'dataset', name: string): FakeRepo | undefined {
    return kind === 'dataset' ? this.datasets[name] : this.repos[name];
  }

  private handleCdn(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '';
    this.record('cdn', req);
    const m = /^\/cdn\/(models|datasets)\/([^/]+\/[^/]+)\/([0-9a-f]{40})\/(.+)$/.exec(url);
    const repo = m ? this.repoOf(m[1] === 'datasets' ? 'dataset' : 'model', m[2] as string) : undefined;
    serveFile(req, res, m ? repo?.commits[m[3] as string]?.[m[4] as string] : undefined, m?.[3] ?? '');
  }
}

/** The listing under `dir` ('' for the root): everything below it, or its direct children; null when no such folder. */
function tree(files: Record<string, FakeFile>, dir: string, recursive: boolean): unknown[] | null {
  const dirs = new Set<string>();
  const entries: unknown[] = [];
  const prefix = dir ? `${dir}/` : '';
  const depth = (path: string): number => path.slice(prefix.length).split('/').length;
  for (const [path, f] of Object.entries(files)) {
    if (!path.startsWith(prefix)) continue;
    path
      .split('/')
      .slice(0, -1)
      .forEach((_, i, parts) => {
        const d = parts.slice(0, i + 1).join('/');
        if (d.startsWith(prefix) && (recursive || depth(d) === 1)) dirs.add(d);
      });
    if (!recursive && depth(path) > 1) continue;
    const lfs = f.lfs ? { lfs: { oid: sha256(f.content), size: f.content.length, pointerSize: 134 } } : {};
    entries.push({ type: 'file', path, size: f.content.length, oid: gitOid(f.content), ...lfs });
  }
  if (dir && entries.length === 0 && dirs.size === 0) return null;
  return [...[...dirs].map((path) => ({ type: 'directory', path, size: 0, oid: '0'.repeat(40) })), ...entries];
}

function serveFile(req: IncomingMessage, res: ServerResponse, file: FakeFile | undefined, sha: string): void {
  if (!file) return json(res, 404, { error: 'Entry not found' }, { 'x-error-code': 'EntryNotFound' });
  const headers = {
    etag: `"${etagOf(file)}"`,
    'x-repo-commit': sha,
    'accept-ranges': 'bytes',
    'content-type': 'application/octet-stream',
  };
  const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  if (!range) {
    res
      .writeHead(200, { ...headers, 'content-length': (file.served ?? file.content).length })
      .end(file.served ?? file.content);
    return;
  }
  const start = Number(range[1]);
  const end = Math.min(Number(range[2]), file.content.length - 1);
  res
    .writeHead(206, { ...headers, 'content-range': `bytes ${start}-${end}/${file.content.length}` })
    .end(file.content.subarray(start, end + 1));
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

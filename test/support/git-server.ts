// An HTTPS git smart-HTTP server for tests and the demo: a thin CGI front for
// the real `git http-backend`, which refuses any request that does not carry
// exactly the expected credential.
import { execFileSync, spawn, type ChildProcessByStdio } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { cachedDir } from './cached-dir.ts';
import { gitEnv } from './git-client.ts';
import type { TestPki } from './tls.ts';

export type GitServerAuth =
  | { type: 'bearer'; token: string }
  | { type: 'basic'; username: string; token: string };

/** A credential the server judges itself (an installation token that rotates): whether to let the request through. */
export type GitServerCheck = { type: 'check'; accepts: (authorization: string | undefined) => boolean };

export interface RecordedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  authorized: boolean;
}

export interface GitServer {
  port: number;
  /** '127.0.0.1:<port>' */
  hostKey: string;
  /** Directory holding the bare repositories (GIT_PROJECT_ROOT). */
  root: string;
  /** Every request received, in arrival order, including rejected ones. */
  requests: RecordedRequest[];
  /**
   * Creates `<root>/<name>` (e.g. 'org/repo.git') as a bare repository that
   * accepts pushes, with one commit on `main` adding README.md ("hello\n").
   * Returns its path.
   */
  createBareRepo(name: string): string;
  close(): Promise<void>;
}

type CgiChild = ChildProcessByStdio<Writable, Readable, Readable>;

interface CgiHead {
  status: number;
  statusMessage: string | undefined;
  headers: OutgoingHttpHeaders;
}

/** A CGI header block larger than this means the child is not speaking CGI. */
const MAX_CGI_HEAD = 64 * 1024;
/** How much of http-backend's stderr to keep for 500 responses. */
const MAX_STDERR = 8 * 1024;

/** The exact Authorization header value the server accepts for `auth`. */
export function authorizationFor(auth: GitServerAuth): string {
  return auth.type === 'bearer'
    ? `Bearer ${auth.token}`
    : `Basic ${Buffer.from(`${auth.username}:${auth.token}`).toString('base64')}`;
}

export async function startGitServer(opts: {
  pki: TestPki;
  auth: GitServerAuth | GitServerCheck;
  root?: string;
}): Promise<GitServer> {
  const ownsRoot = opts.root === undefined;
  const root = opts.root ?? mkdtempSync(join(tmpdir(), 'test-git-root-'));
  // Private HOME for every git process the server runs, so nothing from the
  // real user's ~/.gitconfig affects the server side.
  const home = mkdtempSync(join(tmpdir(), 'test-git-server-home-'));
  const auth = opts.auth;
  const accepts = auth.type === 'check' ? auth.accepts : (authorization: string | undefined) => authorization === authorizationFor(auth);
  const requests: RecordedRequest[] = [];
  const children = new Set<CgiChild>();

  const server = createServer({ key: opts.pki.keyPem, cert: opts.pki.certPem }, (req, res) => {
    const authorized = accepts(req.headers.authorization);
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: { ...req.headers }, authorized });
    if (!authorized) {
      // Node discards the unread request body once the response is finished.
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="test"', 'Content-Type': 'text/plain' });
      res.end('authentication required\n');
      return;
    }
    const [rawPath, query] = splitRequestTarget(req.url ?? '/');
    const pathInfo = decodePath(rawPath);
    if (pathInfo === undefined) {
      res.writeHead(400, { 'Content-Type': 'text/plain' });
      res.end('malformed request path\n');
      return;
    }
    const child = spawnHttpBackend(req, pathInfo, query, root, home);
    children.add(child);
    child.once('close', () => children.delete(child));
    void serveCgi(req, res, child);
  });

  // The fixture never closes an idle keep-alive connection itself (close() cuts them all). The
  // process hosting it blocks its event loop in execFileSync while it creates repositories, for
  // seconds when test files run side by side, so Node's 5 s idle timer could fire late, just as
  // the proxy reuses that connection: the clone then fails with a reset that says nothing about
  // git. (That race, an upstream closing a pooled connection as a request goes out, exists with
  // real hosts too; handling it is the proxy's business, not something these tests look for.)
  server.keepAliveTimeout = 0;

  const removeDirs = (): void => {
    rmSync(home, { recursive: true, force: true });
    if (ownsRoot) rmSync(root, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolveListen, rejectListen) => {
      server.once('error', rejectListen);
      server.listen(0, '127.0.0.1', () => {
        server.off('error', rejectListen);
        resolveListen();
      });
    });
  } catch (err) {
    removeDirs();
    throw err;
  }
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;

  return {
    port,
    hostKey: `127.0.0.1:${port}`,
    root,
    requests,
    createBareRepo: (name) => createBareRepo(root, name),
    close() {
      closing ??= (async () => {
        const exits = [...children].map(
          (child) => new Promise<void>((done) => child.once('close', () => done())),
        );
        for (const child of children) abandon(child);
        const stopped = new Promise<void>((done, fail) => server.close((err) => (err ? fail(err) : done())));
        // close() alone would wait for clients to drop their keep-alive connections.
        server.closeAllConnections();
        await Promise.all([stopped, ...exits]);
        removeDirs();
      })();
      return closing;
    },
  };
}

/**
 * Splits an origin-form request target into raw path and raw query. Done by
 * hand because `new URL()` would read a target like '//x/y' as a host name.
 */
function splitRequestTarget(target: string): [string, string] {
  const q = target.indexOf('?');
  return q === -1 ? [target, ''] : [target.slice(0, q), target.slice(q + 1)];
}

/** Percent-decodes the path, as CGI's PATH_INFO must be; undefined if malformed. */
function decodePath(rawPath: string): string | undefined {
  try {
    return decodeURIComponent(rawPath);
  } catch {
    return undefined;
  }
}

function spawnHttpBackend(
  req: IncomingMessage,
  pathInfo: string,
  query: string,
  root: string,
  home: string,
): CgiChild {
  // CGI meta-variables (RFC 3875). http-backend itself rejects PATH_INFO
  // containing '..', so it cannot escape GIT_PROJECT_ROOT.
  const cgiEnv: Record<string, string> = {
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    REQUEST_METHOD: req.method ?? 'GET',
    PATH_INFO: pathInfo,
    QUERY_STRING: query,
    REMOTE_USER: 'test',
    REMOTE_ADDR: '127.0.0.1',
  };
  const { headers } = req;
  if (headers['content-type'] !== undefined) cgiEnv.CONTENT_TYPE = headers['content-type'];
  // Only when the client sent one: for chunked bodies http-backend must read
  // stdin to EOF, and a made-up length would truncate or hang the request.
  // Never for a GET, whose body the server does not read (see serveCgi).
  if (headers['content-length'] !== undefined && req.method !== 'GET') cgiEnv.CONTENT_LENGTH = headers['content-length'];
  // git gzips larger upload-pack requests; http-backend inflates them only
  // when told the encoding.
  if (headers['content-encoding'] !== undefined) cgiEnv.HTTP_CONTENT_ENCODING = headers['content-encoding'];
  // Without this (or its CGI spelling HTTP_GIT_PROTOCOL, which http-backend
  // also reads) the backend answers in protocol v0 even if the client asked for v2.
  const gitProtocol = headers['git-protocol'];
  if (typeof gitProtocol === 'string') cgiEnv.GIT_PROTOCOL = gitProtocol;

  return spawn('git', ['http-backend'], {
    env: gitEnv(home, cgiEnv),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

async function serveCgi(req: IncomingMessage, res: ServerResponse, child: CgiChild): Promise<void> {
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    if (stderr.length < MAX_STDERR) stderr += text;
  });
  // The client went away (or the server is closing) before the response was complete.
  res.once('close', () => {
    if (!res.writableFinished) abandon(child);
  });

  // Stream the body, never buffering it. A failure here (client abort, or the
  // backend exiting without reading its stdin, e.g. for a 404) is not an error
  // of its own: the response side reports whatever the backend produced.
  // A GET's body is never read: the response is written first and Node then
  // discards whatever body the request head announced, reading it from the
  // connection as it arrives, as any server that answers before reading does.
  if (req.method === 'GET') child.stdin.end();
  else pipeline(req, child.stdin).catch(() => {});

  const closed = new Promise<void>((done) => child.once('close', () => done()));
  // A spawn failure surfaces as 'error' on the child, and as an early end of stdout.
  const spawnError = new Promise<never>((_, reject) => child.once('error', reject));
  let head: CgiHead;
  try {
    head = await Promise.race([readCgiHead(child.stdout), spawnError]);
  } catch (err) {
    abandon(child);
    // Wait for the child to finish so that its whole stderr makes it into the reply.
    await closed;
    if (!res.headersSent && !res.destroyed) {
      res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(`git http-backend failed: ${(err as Error).message}\n${stderr}`);
    }
    return;
  }
  if (res.destroyed) {
    abandon(child);
    return;
  }
  if (head.statusMessage === undefined) res.writeHead(head.status, head.headers);
  else res.writeHead(head.status, head.statusMessage, head.headers);
  // pipe(), not pipeline(): on a client abort pipeline() would destroy the
  // backend's stdout, and abandon() needs it open to drain it.
  child.stdout.pipe(res);
}

/**
 * Stops a backend whose output nobody wants, without killing it: closing its
 * stdin and draining its stdout lets git wind down in order, each process
 * reaping its own helpers. A signal would kill the `git` wrapper, http-backend
 * and upload-pack before upload-pack's pack-objects child, which is orphaned:
 * it keeps running after close() and then sits as a zombie until PID 1 gets
 * round to reaping it (slowly, in some containers).
 *
 * One case does need a signal: an upload cut short below its declared Content-Length makes
 * git 2.39's http-backend retry its read forever at full CPU. A backend still running two
 * seconds after being abandoned is killed.
 */
function abandon(child: CgiChild): void {
  child.stdin.destroy();
  child.stdout.unpipe();
  child.stdout.resume();
  const kill = setTimeout(() => child.kill('SIGKILL'), 2000);
  kill.unref();
  child.once('close', () => clearTimeout(kill));
}

/**
 * Reads the CGI header block from the backend's stdout and pushes any body
 * bytes that came with it back onto the stream, leaving it ready to pipe.
 */
function readCgiHead(stdout: Readable): Promise<CgiHead> {
  return new Promise((resolveHead, rejectHead) => {
    let buffered = Buffer.alloc(0);
    const finish = (): void => {
      stdout.off('readable', onReadable);
      stdout.off('end', onEnd);
      stdout.off('error', onError);
    };
    const onError = (err: Error): void => {
      finish();
      rejectHead(err);
    };
    const onEnd = (): void => onError(new Error('exited without sending CGI headers'));
    const onReadable = (): void => {
      let chunk: Buffer | null;
      while ((chunk = stdout.read() as Buffer | null) !== null) {
        buffered = Buffer.concat([buffered, chunk]);
        const split = findBlankLine(buffered);
        if (split !== undefined) {
          finish();
          let head: CgiHead;
          try {
            head = parseCgiHead(buffered.subarray(0, split.headEnd).toString('latin1'));
          } catch (err) {
            rejectHead(err);
            return;
          }
          if (split.bodyStart < buffered.length) stdout.unshift(buffered.subarray(split.bodyStart));
          resolveHead(head);
          return;
        }
        if (buffered.length > MAX_CGI_HEAD) {
          onError(new Error('CGI header block too large'));
          return;
        }
      }
    };
    stdout.on('readable', onReadable);
    stdout.once('end', onEnd);
    stdout.once('error', onError);
  });
}

/** Finds the empty line ending a header block whose lines end in LF or CRLF. */
function findBlankLine(buf: Buffer): { headEnd: number; bodyStart: number } | undefined {
  let lineStart = 0;
  for (;;) {
    const lf = buf.indexOf(0x0a, lineStart);
    if (lf === -1) return undefined;
    const lineLength = lf - lineStart;
    if (lineLength === 0 || (lineLength === 1 && buf[lineStart] === 0x0d)) {
      return { headEnd: lineStart, bodyStart: lf + 1 };
    }
    lineStart = lf + 1;
  }
}

function parseCgiHead(block: string): CgiHead {
  const head: CgiHead = { status: 200, statusMessage: undefined, headers: {} };
  for (const line of block.split(/\r?\n/)) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`malformed CGI header line: ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') {
      // "Status: 404 Not Found"
      const match = /^(\d{3})(?:\s+(.*))?$/.exec(value);
      if (match === null) throw new Error(`malformed CGI Status: ${JSON.stringify(value)}`);
      head.status = Number(match[1]);
      head.statusMessage = match[2] || undefined;
      continue;
    }
    const previous = head.headers[name];
    if (previous === undefined) head.headers[name] = value;
    else head.headers[name] = [...(Array.isArray(previous) ? previous : [String(previous)]), value];
  }
  return head;
}

let gitVersion: string | undefined;

function createBareRepo(root: string, name: string): string {
  const repoPath = resolve(root, name);
  const rel = relative(root, repoPath);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new Error(`repository name ${JSON.stringify(name)} escapes the server root`);
  }
  // Every repository starts as the same seeded one, made once (cached-dir.ts) and copied here.
  gitVersion ??= execFileSync('git', ['--version'], { encoding: 'utf8' });
  return cachedDir('git-seeded-repo', gitVersion, seedBareRepo, repoPath);
}

/** A bare repository on `main` that accepts pushes, holding one commit of README.md. */
function seedBareRepo(repoPath: string): void {
  const home = mkdtempSync(join(tmpdir(), 'test-git-seed-home-'));
  const work = mkdtempSync(join(tmpdir(), 'test-git-seed-'));
  const git = (args: string[], cwd?: string): void => {
    execFileSync('git', args, { cwd, env: gitEnv(home), stdio: ['ignore', 'pipe', 'pipe'] });
  };
  try {
    git(['init', '--quiet', '--bare', '-b', 'main', repoPath]);
    // Without this http-backend only allows pushes from an authenticated
    // REMOTE_USER; being explicit keeps the fixture independent of that rule.
    git(['-C', repoPath, 'config', 'http.receivepack', 'true']);
    git(['init', '--quiet', '-b', 'main', work]);
    writeFileSync(join(work, 'README.md'), 'hello\n');
    git(['add', 'README.md'], work);
    const identity = ['-c', 'user.name=Fixture', '-c', 'user.email=fixture@example.invalid'];
    git([...identity, 'commit', '--quiet', '-m', 'initial commit'], work);
    git(['push', '--quiet', repoPath, 'main'], work);
    // git init's sample hooks (a dozen files, none enabled) would only be copied into every repository.
    for (const f of readdirSync(join(repoPath, 'hooks'))) if (f.endsWith('.sample')) rmSync(join(repoPath, 'hooks', f));
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  }
}

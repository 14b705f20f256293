// The floor (issue 44): the least a Node.js proxy can do on these paths, in plain node:http and
// https.request, as one process and one event loop like the proxy. It injects the credential,
// drops the hop-by-hop headers and pipes both bodies; it checks nothing, logs nothing, counts
// nothing. Whatever the proxy costs above it is the proxy's own code; what it costs against going
// direct is Node's (an HTTP server exchange and an HTTPS client exchange per request). The same
// socket settings as the proxy (keep-alive pool, LIFO, no Nagle, 256 KiB high-water marks), so
// that only the work per request differs. A third listener, `held`, is the floor of a proxy that
// must read a model call's body whole before it may send it (the gateway checks every call first):
// it reads the body, then opens the upstream request and writes the body with its length, so that
// neither the request's creation nor the body's write overlaps the client's upload, as in the
// proxy. Run with plain node (no loader), as the bundle is:
//   node scripts/bench/floor-proxy.mjs   (config in FLOOR_CONFIG, JSON; prints {"git":port,"model":port})
import { createServer, request as httpRequest } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';

const cfg = JSON.parse(process.env.FLOOR_CONFIG ?? '{}');
const HWM = 256 * 1024;
const ca = readFileSync(cfg.caFile, 'utf8');
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'authorization', 'x-api-key']);

function agent() {
  return new Agent({ keepAlive: true, scheduling: 'lifo', maxFreeSockets: 64, noDelay: true, highWaterMark: HWM, ca });
}

function forwardingHeaders(incoming, add) {
  const out = {};
  for (const name of Object.keys(incoming)) if (!HOP.has(name)) out[name] = incoming[name];
  return Object.assign(out, add);
}

function relay(req, res, port, pool, path, add, held) {
  const headers = forwardingHeaders(req.headers, add);
  if (held !== undefined) headers['content-length'] = held.length;
  const up = httpsRequest({ agent: pool, host: '127.0.0.1', port, method: req.method, path, headers });
  up.on('response', (answer) => {
    const headers = [];
    for (let i = 0; i < answer.rawHeaders.length; i += 2) {
      if (!HOP.has(answer.rawHeaders[i].toLowerCase())) headers.push(answer.rawHeaders[i], answer.rawHeaders[i + 1]);
    }
    res.writeHead(answer.statusCode, headers);
    if (String(answer.headers['content-type']).startsWith('text/event-stream')) res.flushHeaders();
    answer.pipe(res);
    answer.on('error', () => res.destroy());
  });
  up.on('error', () => (res.headersSent ? res.destroy() : (res.writeHead(502, { 'content-length': 0 }), res.end())));
  res.on('close', () => res.writableFinished || up.destroy());
  if (held !== undefined) up.end(held);
  else req.pipe(up);
}

const gitPool = agent();
const modelPool = agent();
const prefix = `/${cfg.hostKey}`;
const git = createServer({ noDelay: true, highWaterMark: HWM, keepAliveTimeout: 120_000, requestTimeout: 0 }, (req, res) => {
  if (!req.url.startsWith(`${prefix}/`)) return void res.writeHead(404, { 'content-length': 0 }).end();
  relay(req, res, cfg.gitPort, gitPool, req.url.slice(prefix.length), { host: cfg.hostKey, authorization: `Bearer ${cfg.token}` });
});
const modelAdd = (req) => ({ host: `127.0.0.1:${cfg.modelPort}`, 'accept-encoding': 'identity', ...(req.url === '/v1/messages' ? { 'x-api-key': cfg.token } : { authorization: `Bearer ${cfg.token}` }) });
const model = createServer({ noDelay: true, highWaterMark: HWM, keepAliveTimeout: 120_000, requestTimeout: 0 }, (req, res) => {
  relay(req, res, cfg.modelPort, modelPool, req.url, modelAdd(req));
});
const held = createServer({ noDelay: true, highWaterMark: HWM, keepAliveTimeout: 120_000, requestTimeout: 0 }, (req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => relay(req, res, cfg.modelPort, modelPool, req.url, modelAdd(req), Buffer.concat(chunks)));
});
const listen = (server) => new Promise((resolve) => server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, () => resolve(server.address().port)));
const ports = { git: await listen(git), model: await listen(model), held: await listen(held) };
console.log(JSON.stringify(ports));
process.on('SIGTERM', () => process.exit(0));

// PROFILE_LATENCY (scripts/profile.ts): preloaded (`node --require`) into the proxy and into the
// floor, it times the phases of each model call, one call at a time, from Node's side only (no
// code of the proxy is changed or called): the request's head, its body's end, the upstream
// request's creation (https.request, timed), its end() call, its first write on the TLS socket and
// how long that write took, the upstream's response head, the client response's end() and the
// loop's first idle turn after it. The phases are wall time in the process, so they show what a
// call waits for on its way (the critical path), which a CPU profile does not. On exit it writes
// the medians of each phase, in µs, as JSON to LATENCY_PROBE_FILE.
'use strict';
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const tls = require('node:tls');
const { performance } = require('node:perf_hooks');
const { writeFileSync } = require('node:fs');

const out = process.env.LATENCY_PROBE_FILE;
const calls = [];
let overlapped = 0;
/** The call in flight (one at a time: a call that arrives before the last one ended is counted, not timed). */
let cur = null;
const now = () => performance.now();

const emit = http.Server.prototype.emit;
http.Server.prototype.emit = function (event, req) {
  if (event === 'request') {
    if (cur !== null && cur.done === undefined) overlapped++;
    const call = { head: now() };
    cur = call;
    req.once('end', () => (call.bodyEnd = now()));
  }
  return emit.apply(this, arguments);
};

const request = https.request;
https.request = function () {
  const call = cur;
  const t = now();
  const made = request.apply(this, arguments);
  if (call !== null && call.created === undefined) {
    call.created = t;
    call.createdFor = now() - t;
    made.once('response', () => (call.response = now()));
  }
  return made;
};

const end = http.ClientRequest.prototype.end;
http.ClientRequest.prototype.end = function () {
  if (cur !== null && cur.sent === undefined) cur.sent = now();
  return end.apply(this, arguments);
};

const writeGeneric = net.Socket.prototype._writeGeneric;
net.Socket.prototype._writeGeneric = function () {
  const call = cur;
  if (!(this instanceof tls.TLSSocket) || call === null || call.sent === undefined || call.written !== undefined) return writeGeneric.apply(this, arguments);
  const t = now();
  const result = writeGeneric.apply(this, arguments);
  call.written = t;
  call.writtenFor = now() - t;
  return result;
};

const resEnd = http.ServerResponse.prototype.end;
http.ServerResponse.prototype.end = function () {
  const call = cur;
  if (call !== null && call.done === undefined) {
    call.done = now();
    calls.push(call);
    setImmediate(() => setImmediate(() => (call.idle = now())));
  }
  return resEnd.apply(this, arguments);
};

const PHASES = {
  'head to body end (the upload)': (c) => c.bodyEnd - c.head,
  'body end to https.request': (c) => c.created - c.bodyEnd,
  'https.request itself': (c) => c.createdFor,
  'https.request to end()': (c) => c.sent - (c.created + c.createdFor),
  'end() to the first TLS write': (c) => c.written - c.sent,
  'the first TLS write itself': (c) => c.writtenFor,
  'write to the response head': (c) => c.response - (c.written + c.writtenFor),
  'response head to the answer\'s end()': (c) => c.done - c.response,
  'head to the answer\'s end() (whole)': (c) => c.done - c.head,
  'end() to the loop idle (after the answer)': (c) => c.idle - c.done,
};

process.on('exit', () => {
  if (!out) return;
  const timed = calls.filter((c) => c.bodyEnd !== undefined && c.created !== undefined && c.sent !== undefined && c.written !== undefined && c.response !== undefined && c.idle !== undefined);
  const medians = {};
  for (const [name, phase] of Object.entries(PHASES)) {
    const xs = timed.map(phase).sort((a, b) => a - b);
    medians[name] = xs.length === 0 ? null : Math.round(xs[Math.floor((xs.length - 1) / 2)] * 10000) / 10;
  }
  writeFileSync(out, `${JSON.stringify({ calls: timed.length, overlapped, medians })}\n`);
});

// Reads the CPU profiles of `npm run profile` (scripts/profile.ts) and says where a request's time
// goes: every sample is given to the nearest frame of our code on its stack (a bundle function:
// its source module, from the bundle's `// src/...` comments, names the step), so a step's time
// includes the Node calls it makes (writeHead, a socket write); samples with none of our code on
// the stack are Node's own (its HTTP parser and responses, TLS, streams, the garbage collector,
// native work), grouped by where they run. The same for the floor (floor-proxy.mjs), whose own
// code is one step. Times are busy microseconds per request (idle excluded).
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** A source module of the bundle, by its path under src/, to the step of a request it serves. */
const STEPS: readonly [RegExp, string][] = [
  [/^src\/http\/(server|connections|connection-caps|tls-listener|address|sockets)\.ts$/, 'listener: accept, one at a time, form checks'],
  [/^src\/(git|gateway)\/route\.ts$/, 'route'],
  [/^src\/(auth\/|git\/access\.ts|gateway\/authenticate\.ts)/, 'authenticate'],
  [/^src\/(git\/(credentials|github-app)\.ts|config\/secret\.ts|gateway\/credentials\/)/, 'credential'],
  [/^src\/http\/(headers|trace-context)\.ts$/, 'headers: allowlist, scrub'],
  [/^src\/(gateway\/body\.ts|http\/(held-bodies|held-bytes|body-idle)\.ts)/, 'body: read, hold'],
  [/^src\/(json\/|gateway\/check-call\.ts|gateway\/protocols\/|limits\/worst-case\.ts)/, 'body check: strict JSON, protocol rules, usage readers'],
  [/^src\/(limits\/|gateway\/admit-call\.ts)/, 'admission, charge'],
  [/^src\/gateway\/(prepare-upstream|providers)\.ts$/, 'prepare upstream'],
  [/^src\/http\/(forward|slices|egress|tunnel)\.ts$/, 'upstream: send, relay (forward.ts)'],
  [/^src\/(gateway\/(relay|attempts|retry|json-capture)\.ts|http\/error-body\.ts)/, 'relay answer, retries'],
  [/^src\/gateway\/(sse|eventstream)\.ts$/, 'stream inspector: SSE and event-stream framing'],
  [/^src\/http\/(redact|redactor|secret-forms|spelled-secrets)\.ts$/, 'redaction'],
  [/^src\/(http\/(lifecycle|respond|errors)|git\/call|gateway\/call)\.ts$/, 'call lifecycle, errors'],
  [/^src\/(git\/record\.ts|gateway\/(record|log-events)\.ts|http\/(log|line-writer)\.ts|run\/)/, 'record, log line'],
  [/^src\/(telemetry\/|http\/otlp-client\.ts)/, 'tracing: spans, export'],
  [/^src\/metrics\//, 'metrics'],
  [/^src\/(git\/proxy|gateway\/handler)\.ts$/, 'handler (the steps in order)'],
];

/** Node's own time, by the first frame with a script on the stack (native frames have none). */
function nodeArea(url: string, name: string): string {
  if (name === '(garbage collector)') return 'Node: garbage collector';
  if (name === '(program)') return 'Node: native, outside JS (syscalls, parser, TLS records)';
  if (/_http_|node:https?$/.test(url)) return 'Node: HTTP (server and client JS)';
  if (/_tls_|node:tls/.test(url)) return 'Node: TLS (JS)';
  if (/node:(net|events|internal\/(streams|stream_base_commons|timers|process\/task_queues))|node:stream/.test(url)) return 'Node: streams, sockets, timers, ticks (JS)';
  return url.startsWith('node:') ? 'Node: other (JS)' : `other: ${url || name}`;
}

/** Line (0-based) to source module, from the bundle's `// src/<module>.ts` comments. */
function moduleLines(bundle: string): (line: number) => string {
  const starts: [number, string][] = [];
  readFileSync(bundle, 'utf8')
    .split('\n')
    .forEach((l, i) => {
      const m = /^\/\/ (src\/\S+\.ts)$/.exec(l);
      if (m) starts.push([i, m[1]!]);
    });
  return (line) => {
    let lo = 0;
    let hi = starts.length - 1;
    let found = '(bundle header)';
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid]![0] <= line) {
        found = starts[mid]![1];
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  };
}

const stepOf = (module: string) => STEPS.find(([re]) => re.test(module))?.[1] ?? `other code: ${module}`;

interface Attributed {
  busyUs: number;
  steps: Map<string, number>;
  self: Map<string, number>;
}

/** Busy time by step (nearest own frame, else Node's area) and self time by function. */
function attribute(file: string, own: (url: string) => boolean, ownStep: (frame: ProfileNode['callFrame']) => string, label: (frame: ProfileNode['callFrame']) => string): Attributed {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stepCache = new Map<number, string>();
  const stepFor = (id: number): string => {
    const hit = stepCache.get(id);
    if (hit !== undefined) return hit;
    let firstScript: ProfileNode | undefined;
    let step: string | undefined;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const n = byId.get(at)!;
      if (own(n.callFrame.url)) {
        step = ownStep(n.callFrame);
        break;
      }
      if (!firstScript && n.callFrame.url) firstScript = n;
    }
    const leaf = byId.get(id)!.callFrame;
    step ??= nodeArea(firstScript?.callFrame.url ?? '', leaf.functionName);
    stepCache.set(id, step);
    return step;
  };
  const out: Attributed = { busyUs: 0, steps: new Map(), self: new Map() };
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i]!;
    const dt = p.timeDeltas[i] ?? 0;
    const f = byId.get(id)!.callFrame;
    if (f.functionName === '(idle)') continue;
    out.busyUs += dt;
    const s = stepFor(id);
    out.steps.set(s, (out.steps.get(s) ?? 0) + dt);
    const k = label(f);
    out.self.set(k, (out.self.get(k) ?? 0) + dt);
  }
  return out;
}

export interface ProfiledProcess {
  file: string;
  requests: number;
  /** User plus system CPU seconds over the load (/proc), profiler included. */
  cpuS: number;
}

export function summariseSteps(o: { path: string; unit: string; proxy: ProfiledProcess; floor: ProfiledProcess; bundle: string; top?: number }): string {
  const moduleOf = moduleLines(o.bundle);
  const bundleUrl = pathToFileURL(o.bundle).href;
  const isBundle = (url: string) => url === bundleUrl;
  const proxy = attribute(
    o.proxy.file,
    isBundle,
    (f) => stepOf(moduleOf(f.lineNumber)),
    (f) => (isBundle(f.url) ? `${f.functionName || '(anonymous)'}  ${moduleOf(f.lineNumber)}` : `${f.functionName || '(anonymous)'}  ${f.url.replace(/^node:/, 'node:')}${f.url ? `:${f.lineNumber + 1}` : ''}`),
  );
  const floor = attribute(
    o.floor.file,
    (url) => url.endsWith('floor-proxy.mjs'),
    () => 'the floor script (floor-proxy.mjs)',
    (f) => `${f.functionName || '(anonymous)'}  ${f.url}`,
  );
  const per = (us: number, n: number) => (us / n).toFixed(1).padStart(8);
  const lines = [
    `== ${o.path}: ${o.proxy.requests} through the proxy, ${o.floor.requests} through the floor; figures per ${o.unit}, profiler running`,
    `CPU per ${o.unit} (/proc, user+sys): proxy ${((o.proxy.cpuS / o.proxy.requests) * 1e6).toFixed(0)} µs, floor ${((o.floor.cpuS / o.floor.requests) * 1e6).toFixed(0)} µs (${(o.proxy.cpuS / o.proxy.requests / (o.floor.cpuS / o.floor.requests)).toFixed(2)}x)`,
    `busy time per ${o.unit} in the profile: proxy ${(o.proxy.requests ? proxy.busyUs / o.proxy.requests : 0).toFixed(1)} µs, floor ${(floor.busyUs / o.floor.requests).toFixed(1)} µs`,
    '',
    `by step (our code's steps include the Node calls they make; "Node:" is time with none of our code on the stack), µs per ${o.unit}:`,
    `  ${'step'.padEnd(58)}  ${'proxy'.padStart(8)}  ${'floor'.padStart(8)}`,
  ];
  const names = [...new Set([...proxy.steps.keys(), ...floor.steps.keys()])].sort((a, b) => (proxy.steps.get(b) ?? 0) - (proxy.steps.get(a) ?? 0));
  for (const s of names) lines.push(`  ${s.padEnd(58)}  ${per(proxy.steps.get(s) ?? 0, o.proxy.requests)}  ${per(floor.steps.get(s) ?? 0, o.floor.requests)}`);
  lines.push('', `proxy, self time by function, µs per ${o.unit} (top ${o.top ?? 20}):`);
  for (const [k, us] of [...proxy.self].sort((a, b) => b[1] - a[1]).slice(0, o.top ?? 20)) lines.push(`  ${per(us, o.proxy.requests)}  ${((us / proxy.busyUs) * 100).toFixed(1).padStart(5)}%  ${k}`);
  return lines.join('\n');
}

// What one request body costs the gateway's event loop before it is forwarded: the strict check
// (scan with depth and node limits, JSON.parse, case-folded key checks) of the worst bodies the
// limits accept and of the giant ones they refuse, against a bare JSON.parse of the same bytes,
// in the same run. Median and max of 7 runs each.
//
// The code measured is the code that ships: src/ bundled by esbuild into one scope, as build.mjs
// bundles dist/proxy.js. Run module by module through tsx instead, each binding a module imports
// is read through a getter on the exporting module, which makes a byte loop slower than it is in
// the bundle (where the byte values of src/json/chars.ts, a const enum, are numbers inline).
//
//   npm run bench:parse
import { buildSync } from 'esbuild';
import path from 'node:path';
import type { JsonLimits } from '../src/json/scan.ts';
import type { PolicyKeys } from '../src/json/keys.ts';
import type { parseStrictJson as ParseStrictJson } from '../src/json/strict.ts';

const root = path.join(__dirname, '..');
const bundle = buildSync({
  stdin: {
    contents: "export { parseStrictJson } from './src/json/strict.ts'; export { BODY_LIMITS, POLICY_KEYS } from './src/gateway/check-call.ts';",
    resolveDir: root,
    loader: 'ts',
  },
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  write: false,
  logLevel: 'warning',
});
const bundled = { exports: {} as { parseStrictJson: typeof ParseStrictJson; BODY_LIMITS: JsonLimits; POLICY_KEYS: PolicyKeys } };
new Function('module', 'exports', 'require', bundle.outputFiles[0]!.text)(bundled, bundled.exports, require);
const { parseStrictJson, BODY_LIMITS, POLICY_KEYS } = bundled.exports;

const N = BODY_LIMITS.maxNodes;
const RUNS = 7;

/** Bodies at the limits (accepted) and far beyond them (refused); sizes stay under --max-request-body's 32 MiB. */
const BODIES: Record<string, () => string> = {
  'accepted: empty objects up to the node limit': () => `{"model":"m","messages":[],"x":[${Array.from({ length: (N - 6) / 2 }, () => '{}').join(',')}]}`,
  'accepted: one object with keys up to the node limit': () => `{"model":"m","messages":[],"x":{${Array.from({ length: (N - 6) / 2 }, (_, i) => `"k${i}":0`).join(',')}}}`,
  'accepted: 32 MiB of message text': () => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(32 * 1024 * 1024 - 100) }] }),
  'accepted: 32 MiB spread over the node limit': () => JSON.stringify({ model: 'm', messages: Array.from({ length: Math.floor((N - 6) / 6) }, () => ({ role: 'user', content: 'y'.repeat(Math.floor((32 * 1024 * 1024) / (N / 6)) - 40) })) }),
  'refused: 10 million empty objects': () => `{"model":"m","messages":[],"x":[${'{},'.repeat(10_000_000)}{}]}`,
  'refused: 16 million nested arrays': () => '['.repeat(16_000_000),
  'refused: 16 million numbers': () => `{"model":"m","messages":[],"x":[${'1,'.repeat(16_000_000)}1]}`,
};

function timed(fn: () => void): { median: number; max: number } {
  const t: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    fn();
    t.push(performance.now() - start);
  }
  t.sort((a, b) => a - b);
  return { median: t[RUNS >> 1]!, max: t[RUNS - 1]! };
}

const ms = (v: number) => `${v.toFixed(1)} ms`;
console.log(`limits: depth ${BODY_LIMITS.maxDepth}, ${N} nodes (objects, arrays, keys, array elements); node ${process.version}`);
console.log('| body | MiB | outcome | strict check, median (max) | JSON.parse alone, median |');
console.log('|---|---:|---|---:|---:|');
for (const [name, make] of Object.entries(BODIES)) {
  const bytes = Buffer.from(make());
  let outcome = '';
  const strict = timed(() => {
    const r = parseStrictJson(bytes, { limits: BODY_LIMITS, policyKeys: POLICY_KEYS });
    outcome = r.ok ? 'accepted' : r.reason;
  });
  let bare = 'fails';
  try {
    bare = ms(timed(() => JSON.parse(bytes.toString('utf8'))).median);
  } catch {
    // unterminated nesting: JSON.parse throws, after reading it all
  }
  console.log(`| ${name} | ${(bytes.length / 1048576).toFixed(1)} | ${outcome} | ${ms(strict.median)} (${ms(strict.max)}) | ${bare} |`);
}

// `npm run profile` (issue 44): where a request's time goes, path by path. For each hot path (ref
// discovery, a push streaming, a non-streamed model call, a streamed one, a Messages stream) it
// starts the bench's upstreams and load generator (scripts/bench/), a fresh built bundle and a
// fresh floor (scripts/bench/floor-proxy.mjs), both under `node --cpu-prof`, drives the bench's
// load through them in turns, stops them (the profiles are written at exit) and prints, for the
// proxy against the floor: CPU per request (from /proc), and the profile's busy time per request
// grouped by the request's steps (scripts/bench/profile-steps.ts), then the top functions by self
// time. Profiles and summaries land in bench-results/profile/.
//   PROFILE_ONLY=refs,chat  a subset (refs, push, chat, stream, messages)
//   PROFILE_SECONDS=8       load per path and per process (default 8; the push: PROFILE_PUSH_MIB, 256, x3)
//   PROFILE_BUNDLE=file     profile another bundle than dist/proxy.js
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { BUNDLE, ROOT } from '../test/support/proxy-process.ts';
import { makeTestPki } from '../test/support/tls.ts';
import { entry, startChild, type Child } from './bench/ipc.ts';
import type { Target } from './bench/loadgen-proc.ts';
import { cpuSeconds, launchFloor, launchProxy, proxyArgs } from './bench/procs.ts';
import { summariseSteps } from './bench/profile-steps.ts';
import { CLAUDE_MODEL, MODEL } from './bench/shared.ts';

const PATHS = ['refs', 'push', 'chat', 'stream', 'messages'] as const;
type PathName = (typeof PATHS)[number];
const OUT = join(ROOT, 'bench-results', 'profile');
const only = (process.env.PROFILE_ONLY ?? '').split(',').filter(Boolean);
for (const o of only) if (!(PATHS as readonly string[]).includes(o)) throw new Error(`PROFILE_ONLY: unknown path ${o} (${PATHS.join(', ')})`);
const SECONDS = Number(process.env.PROFILE_SECONDS ?? 8);
const PUSH_MIB = Number(process.env.PROFILE_PUSH_MIB ?? 256);
const bundle = process.env.PROFILE_BUNDLE || BUNDLE;

/** Drives `kind` through the targets in turns for about SECONDS each; returns requests per target. */
async function drive(lg: Child, path: PathName, targets: Target[], seed: string): Promise<Record<string, number>> {
  const count: Record<string, number> = {};
  if (path === 'push') {
    for (let r = 0; r < 3; r++) {
      for (const t of r % 2 ? [...targets].reverse() : targets) {
        await lg.call('upload', { target: t, mib: PUSH_MIB, seed });
        count[t.name] = (count[t.name] ?? 0) + 1;
      }
    }
    return count;
  }
  if (path === 'refs') {
    const got = await lg.call<Record<string, { counts: number[] }>>('closedLoop', { targets, kind: 'refs', conns: 64, sliceMs: 1000, rounds: SECONDS, warmupMs: 500 });
    for (const [k, v] of Object.entries(got)) count[k] = v.counts.reduce((a, b) => a + b, 0);
    return count;
  }
  // One call at a time, the targets taking turns call by call: about 1 ms a call through the proxy.
  const kind = path === 'chat' ? 'chat' : path === 'stream' ? 'ttfb' : 'messages';
  const n = Math.round(SECONDS * 700);
  const got = await lg.call<Record<string, { latencies: Float64Array }>>('sequential', { targets, kind, n, warmup: 100 });
  for (const [k, v] of Object.entries(got)) count[k] = v.latencies.length + 100;
  return count;
}

async function main(): Promise<void> {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  const pki = makeTestPki();
  const token = `bench-${randomBytes(16).toString('hex')}`;
  const seed = randomBytes(8).toString('hex');
  const [up, lg] = await Promise.all([startChild(entry('upstream-proc.ts'), ROOT), startChild(entry('loadgen-proc.ts'), ROOT)]);
  const report: string[] = [`npm run profile, ${new Date().toISOString()}, node ${process.version}, bundle ${bundle}`];
  try {
    const { gitPort, modelPort } = await up.call<{ gitPort: number; modelPort: number }>('start', { keyPem: pki.keyPem, certPem: pki.certPem, token, seed });
    const hostKey = `127.0.0.1:${gitPort}`;
    const providersFile = join(pki.dir, 'providers.json');
    writeFileSync(providersFile, JSON.stringify({ providers: [{ name: 'anthropic', kind: 'anthropic', baseUrl: `https://127.0.0.1:${modelPort}`, keyEnv: 'ANTHROPIC_BENCH_KEY', models: [CLAUDE_MODEL] }] }));
    const env = {
      GIT_HOST_A: hostKey,
      GIT_HOST_A_TOKEN: token,
      NODE_EXTRA_CA_CERTS: pki.caFile,
      UPSTREAM_BASE_URL: `https://127.0.0.1:${modelPort}/v1`,
      UPSTREAM_API_KEY: token,
      UPSTREAM_ALLOWED_MODELS: MODEL,
      ANTHROPIC_BENCH_KEY: token,
    };
    const pa = proxyArgs();
    pa.args.push('--providers', providersFile);
    for (const path of PATHS) {
      if (only.length && !only.includes(path)) continue;
      const dir = join(OUT, path);
      mkdirSync(join(dir, 'proxy'), { recursive: true });
      mkdirSync(join(dir, 'floor'), { recursive: true });
      const proxy = await launchProxy({ env, ...pa, bundle, nodeArgs: ['--cpu-prof', '--cpu-prof-dir', join(dir, 'proxy')] });
      const floor = await launchFloor({ hostKey, gitPort, modelPort, token, caFile: pki.caFile, nodeArgs: ['--cpu-prof', '--cpu-prof-dir', join(dir, 'floor')] });
      const git = path === 'refs' || path === 'push';
      const headers = {};
      const targets: Target[] = [
        { name: 'floor', scheme: 'http', port: git ? floor.ports.git : floor.ports.model, prefix: git ? `/${hostKey}` : '', headers },
        { name: 'proxy', scheme: 'http', port: git ? proxy.ports.git! : proxy.ports.model!, prefix: git ? `/${hostKey}` : '', headers },
      ];
      process.stderr.write(`[profile] ${path}: driving the floor and the proxy in turns\n`);
      const cpu0 = { proxy: cpuSeconds(proxy.pid), floor: cpuSeconds(floor.pid) };
      const requests = await drive(lg, path, targets, seed);
      const cpu = { proxy: cpuSeconds(proxy.pid) - cpu0.proxy, floor: cpuSeconds(floor.pid) - cpu0.floor };
      await Promise.all([proxy.stop(), floor.stop()]);
      const file = (who: string) => {
        const f = readdirSync(join(dir, who)).find((x) => x.endsWith('.cpuprofile'));
        if (!f) throw new Error(`no profile written by the ${who} for ${path}`);
        return join(dir, who, f);
      };
      const unit = path === 'push' ? `push of ${PUSH_MIB} MiB` : 'request';
      const text = summariseSteps({ path, unit, proxy: { file: file('proxy'), requests: requests.proxy!, cpuS: cpu.proxy }, floor: { file: file('floor'), requests: requests.floor!, cpuS: cpu.floor }, bundle });
      writeFileSync(join(dir, 'summary.txt'), `${text}\n`);
      report.push('', text);
      process.stderr.write(`[profile] ${path}: done\n`);
    }
  } finally {
    await Promise.all([up.stop(), lg.stop()]);
    pki.cleanup();
  }
  writeFileSync(join(OUT, 'summary.txt'), `${report.join('\n')}\n`);
  console.log(report.join('\n'));
  console.log(`\nwritten: ${OUT}/<path>/{proxy,floor}/*.cpuprofile and summary.txt`);
}

main().catch((err: unknown) => {
  console.error(`profile failed: ${(err as Error)?.stack ?? String(err)}`);
  process.exitCode = 1;
});

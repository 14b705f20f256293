// `npm run bench` (issue 6): what the proxy costs against going direct to the same local
// upstream, and against nginx doing the same job, measured in one run with the paths taking
// turns so that machine noise hits them alike. Prints a table with every target and writes
// bench-results/bench.json and bench-results/bench.svg. Loopback only; every loop is bounded.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { judgeTrend, type Sample } from '../memory-trend.ts';
import { BUNDLE, ROOT } from '../../test/support/proxy-process.ts';
import { makeTestPki } from '../../test/support/tls.ts';
import { loadConfig, type ScenarioName } from './config.ts';
import type { Ctx, ScenarioResult } from './context.ts';
import { entry, startChild } from './ipc.ts';
import { bundleHelp, launchFloor, launchNginx, launchProxy, nginxBinary, nginxVersion, peakRssBytes, proxyArgs, proxyEnvFor, rssBytes, type NginxRun, type ProxyRun } from './procs.ts';
import { svg, table, verdict, VERSUS, type Row } from './report.ts';
import { limits } from './scenarios/limits.ts';
import { messages } from './scenarios/messages.ts';
import { model } from './scenarios/model.ts';
import { openStreams } from './scenarios/open.ts';
import { pack } from './scenarios/pack.ts';
import { refs } from './scenarios/refs.ts';
import { responses } from './scenarios/responses.ts';
import { startup } from './scenarios/startup.ts';
import { streams } from './scenarios/streams.ts';
import { CLAUDE_MODEL, median, MiB } from './shared.ts';

export const OUT_DIR = join(ROOT, 'bench-results');

/** BENCH_OTEL: tracing off, or on (every call sampled) to a collector that answers, throttles, is down or is slow. */
const COLLECTOR_MODES: Readonly<Record<string, string>> = {
  on: 'answers 200 at once',
  '429': 'answers every export 429 with Retry-After: 1',
  down: 'refuses every connection (nothing listens)',
  slow: 'answers each export after 20 s (past the 10 s export timeout)',
};

/** A collector on loopback for BENCH_OTEL, and the OTEL_* variables that point the proxy at it. */
async function startCollector(mode: string): Promise<{ env: Record<string, string>; close: () => Promise<void> } | undefined> {
  if (mode === 'off') return undefined;
  if (COLLECTOR_MODES[mode] === undefined) throw new Error(`BENCH_OTEL: unknown mode ${mode} (off, ${Object.keys(COLLECTOR_MODES).join(', ')})`);
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (mode === '429') return void res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/json' }).end('{}');
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      if (mode === 'slow') setTimeout(answer, 20_000).unref();
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  if (mode === 'down') await new Promise<void>((resolve) => server.close(() => resolve()));
  return {
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_SAMPLER: 'always_on' },
    close: () => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve())).then(() => server.closeAllConnections()),
  };
}

export async function main(): Promise<number> {
  const cfg = loadConfig();
  const began = performance.now();
  const say = (m: string) => process.stderr.write(`[bench ${((performance.now() - began) / 1000).toFixed(0).padStart(3)} s] ${m}\n`);
  if (!existsSync(BUNDLE)) throw new Error(`${BUNDLE} is missing: run node build.mjs first (npm run bench does)`);
  mkdirSync(OUT_DIR, { recursive: true });

  const cleanups: (() => unknown)[] = [];
  const cleanup = async () => {
    while (cleanups.length) {
      try {
        await cleanups.pop()!();
      } catch {
        // best effort: everything else still gets stopped
      }
    }
  };
  const onSignal = (sig: NodeJS.Signals) => {
    say(`${sig}: stopping everything`);
    void cleanup().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // The rounds repeat most of the run: each round adds the default allowance again.
  const watchdogS = Number(process.env.BENCH_TIMEOUT_S ?? (cfg.quick ? 300 : 900) * cfg.rounds);
  const watchdog = setTimeout(() => {
    say(`still running after ${watchdogS} s (BENCH_TIMEOUT_S): giving up`);
    void cleanup().then(() => process.exit(1));
  }, watchdogS * 1000);
  watchdog.unref();

  const results: Partial<Record<ScenarioName | 'memory', ScenarioResult>> = {};
  const errors: Record<string, string> = {};
  let nginxNote = '';
  let nginxConfig: string | undefined;
  let mainProxy: ProxyRun | undefined;
  try {
    const pki = makeTestPki();
    cleanups.push(() => pki.cleanup());
    const token = `bench-${randomBytes(16).toString('hex')}`;
    const seed = randomBytes(8).toString('hex');
    const [up, lg] = await Promise.all([startChild(entry('upstream-proc.ts'), ROOT), startChild(entry('loadgen-proc.ts'), ROOT)]);
    cleanups.push(() => up.stop(), () => lg.stop());
    const { gitPort, modelPort } = await up.call<{ gitPort: number; modelPort: number }>('start', { keyPem: pki.keyPem, certPem: pki.certPem, token, seed });
    const hostKey = `127.0.0.1:${gitPort}`;
    const collector = await startCollector(process.env.BENCH_OTEL ?? 'off');
    cleanups.push(() => collector?.close());
    const proxyEnv: Record<string, string> = {
      ...collector?.env,
      ...proxyEnvFor({ gitPort, modelPort, token, caFile: pki.caFile }),
      // The upstream serves the Responses API's WebSocket mode (the responses scenario).
      UPSTREAM_WEBSOCKET: 'true',
      ANTHROPIC_BENCH_KEY: token,
    };
    const pa = proxyArgs();
    // Without BENCH_BASELINE the bench measures this build as before. With it (the path of
    // another build's dist/proxy.js, say the commit before a change), that build runs beside this
    // one as the path `base`, taking turns with it in every scenario. Each build that knows
    // protected refs then registers the host from a hosts file with one, so that every pack
    // upload is read and decided against a rule on its way; a build from before them (70201bd)
    // runs configured as it always was.
    const baseEnv = { ...proxyEnv };
    const baseArgs = { args: [...pa.args], listeners: [...pa.listeners] };
    if (cfg.baseline) {
      const hostsFile = join(pki.dir, 'bench-hosts.json');
      writeFileSync(hostsFile, JSON.stringify({ hosts: [{ host: hostKey, auth: 'bearer', tokenEnv: 'BENCH_GIT_TOKEN', protectedRefs: ['refs/heads/main'] }] }));
      for (const [bundle, env, a] of [[BUNDLE, proxyEnv, pa], [cfg.baseline, baseEnv, baseArgs]] as const) {
        if (!readFileSync(bundle, 'latin1').includes('protectedRefs')) continue;
        delete env.GIT_HOST_A;
        delete env.GIT_HOST_A_TOKEN;
        env.BENCH_GIT_TOKEN = token;
        a.args.push('--git-hosts', hostsFile);
      }
    }
    // An anthropic-kind provider beside the UPSTREAM_* one, on the same upstream process, for
    // the Messages scenario (a bundle without --providers runs without it).
    if (bundleHelp().includes('--providers')) {
      const providersFile = join(pki.dir, 'providers.json');
      writeFileSync(providersFile, JSON.stringify({ providers: [{ name: 'anthropic', kind: 'anthropic', baseUrl: `https://127.0.0.1:${modelPort}`, keyEnv: 'ANTHROPIC_BENCH_KEY', models: [CLAUDE_MODEL] }] }));
      pa.args.push('--providers', providersFile);
      baseArgs.args.push('--providers', providersFile);
    }

    const run = async (name: ScenarioName, fn: () => Promise<ScenarioResult>) => {
      if (!cfg.run(name)) return;
      const t = performance.now();
      try {
        results[name] = await fn();
        say(`${name}: done in ${((performance.now() - t) / 1000).toFixed(1)} s`);
      } catch (e) {
        errors[name] = (e as Error)?.stack ?? String(e);
        say(`${name}: FAILED: ${(e as Error)?.message ?? e}`);
      }
    };

    // Start-up first, while nothing else loads the machine.
    await run('startup', () => startup({ cfg, proxyEnv, proxyArgs: pa }));
    await run('limits', () => limits({ calls: cfg.limitsCalls, rounds: 5 }));

    mainProxy = await launchProxy({ env: proxyEnv, ...pa, nodeArgs: cfg.cpuProf ? ['--cpu-prof', '--cpu-prof-dir', OUT_DIR] : [] });
    const proxy = mainProxy;
    cleanups.push(() => proxy.stop());
    const floor = await launchFloor({ hostKey, gitPort, modelPort, token, caFile: pki.caFile });
    cleanups.push(() => floor.stop());
    const base = cfg.baseline ? await launchProxy({ env: baseEnv, ...baseArgs, bundle: cfg.baseline }) : undefined;
    if (base) cleanups.push(() => base.stop());
    let nginx: NginxRun | undefined;
    const bin = nginxBinary();
    if (!bin) nginxNote = 'nginx not installed: nginx columns skipped (apt-get install nginx to compare)';
    else {
      try {
        nginx = await launchNginx(bin, { hostKey, upstreamPort: gitPort, token, caFile: pki.caFile });
        const n = nginx;
        cleanups.push(() => n.stop());
        nginxConfig = nginx.config;
        nginxNote = `${nginxVersion(bin)}, one process (master_process off), keep-alive pool of 64, no buffering; config in bench.json`;
      } catch (e) {
        nginxNote = `nginx failed to start, nginx columns skipped: ${(e as Error).message.split('\n')[0]}`;
      }
    }
    const ctx: Ctx = {
      cfg,
      pki,
      token,
      seed,
      up,
      lg,
      gitPort,
      modelPort,
      proxyEnv,
      proxyArgs: pa,
      proxy,
      floor,
      base,
      nginx,
      git: {
        direct: { name: 'direct', scheme: 'https', port: gitPort, prefix: '', headers: { authorization: `Bearer ${token}` }, ca: pki.caPem },
        proxy: { name: 'proxy', scheme: 'http', port: proxy.ports.git!, prefix: `/${hostKey}`, headers: {} },
        floor: { name: 'floor', scheme: 'http', port: floor.ports.git, prefix: `/${hostKey}`, headers: {} },
        base: base ? { name: 'base', scheme: 'http', port: base.ports.git!, prefix: `/${hostKey}`, headers: {} } : undefined,
        nginx: nginx ? { name: 'nginx', scheme: 'http', port: nginx.port, prefix: `/${hostKey}`, headers: {} } : undefined,
      },
      model: {
        direct: { name: 'direct', scheme: 'https', port: modelPort, prefix: '', headers: { authorization: `Bearer ${token}` }, ca: pki.caPem },
        proxy: { name: 'proxy', scheme: 'http', port: proxy.ports.model!, prefix: '', headers: {} },
        floor: { name: 'floor', scheme: 'http', port: floor.ports.model, prefix: '', headers: {} },
        base: base ? { name: 'base', scheme: 'http', port: base.ports.model!, prefix: '', headers: {} } : undefined,
        nginx: undefined,
      },
      messages: {
        direct: { name: 'direct', scheme: 'https', port: modelPort, prefix: '', headers: { 'x-api-key': token }, ca: pki.caPem },
        proxy: { name: 'proxy', scheme: 'http', port: proxy.ports.model!, prefix: '', headers: {} },
        floor: { name: 'floor', scheme: 'http', port: floor.ports.model, prefix: '', headers: {} },
        base: base ? { name: 'base', scheme: 'http', port: base.ports.model!, prefix: '', headers: {} } : undefined,
        nginx: undefined,
      },
      say,
    };
    // BENCH_ROUNDS=N: the comparison N times over, the same processes throughout; each figure is
    // then the median of the rounds, each ratio the median of the rounds' ratios (with their
    // range), and the proxy's memory is judged as a trend from the first round (the warm-up) on.
    const perRound: Partial<Record<ScenarioName, ScenarioResult>>[] = [];
    const memory: Memory = { rss: {}, samples: {}, peak: {} };
    const watched: Record<string, number | undefined> = { proxy: proxy.pid, floor: floor.pid, base: base?.pid };
    const notePeaks = (pack?: ScenarioResult) => {
      for (const [k, pid] of Object.entries(watched)) {
        if (pid === undefined) continue;
        const packPeak = (pack?.data.peak_rss_mib as Record<string, number[]> | undefined)?.[k] ?? [];
        memory.peak[k] = Math.max(memory.peak[k] ?? 0, peakRssBytes(pid) / MiB, ...packPeak);
      }
    };
    for (let round = 0; round < cfg.rounds; round++) {
      if (cfg.rounds > 1) say(`round ${round + 1} of ${cfg.rounds}`);
      const thisRound: Partial<Record<ScenarioName, ScenarioResult>> = {};
      for (const k of ['pack', 'refs', 'model', 'messages', 'streams'] as const) {
        delete results[k];
        await run(k, () => ({ pack, refs, model, messages, streams })[k](ctx));
        notePeaks(k === 'pack' ? results.pack : undefined);
        // After the first round (the warm-up), RSS after every scenario: the samples of the trend.
        if (round > 0) for (const [w, pid] of Object.entries(watched)) if (pid !== undefined) (memory.samples[w] ??= []).push({ atMs: performance.now(), value: rssBytes(pid) / MiB });
        if (results[k]) thisRound[k] = results[k];
      }
      perRound.push(thisRound); // only what the rounds repeat: start-up and limits ran once
      await new Promise((r) => setTimeout(r, 500));
      for (const [k, pid] of Object.entries(watched)) if (pid !== undefined) (memory.rss[k] ??= []).push(rssBytes(pid) / MiB);
    }
    if (cfg.rounds > 1) Object.assign(results, mediansOfRounds(perRound));
    results.memory = memoryResult(memory, cfg.rounds);
    await run('responses', () => responses(ctx));
    await run('open', () => openStreams(ctx));
    const upStats = await up.call<Record<string, number>>('stats');
    if (upStats.refused || upStats.packBad || upStats.chatBad) errors.upstream = `the upstream refused ${upStats.refused} requests, saw ${upStats.packBad} corrupt packs and ${upStats.chatBad} bad chat bodies`;
    await cleanup();
    report({ cfg, results, errors, nginx: nginx !== undefined, nginxNote, nginxConfig, proxyLogLines: proxy.lines(), upStats, seconds: (performance.now() - began) / 1000 });
  } finally {
    clearTimeout(watchdog);
    await cleanup();
  }
  return Object.keys(errors).length ? 1 : 0;
}

/**
 * The rounds as one result per scenario: each figure the median of the rounds', each row keeping
 * the rounds' ratios (proxy over each other path) for the table's ranges; the data of every round.
 */
function mediansOfRounds(rounds: Partial<Record<ScenarioName, ScenarioResult>>[]): Partial<Record<ScenarioName, ScenarioResult>> {
  const out: Partial<Record<ScenarioName, ScenarioResult>> = {};
  for (const name of Object.keys(rounds[0] ?? {}) as ScenarioName[]) {
    const each = rounds.map((r) => r[name]).filter((r): r is ScenarioResult => r !== undefined);
    const rows = each[0]!.rows.map((first) => {
      const same = each.map((r) => r.rows.find((x) => x.id === first.id)).filter((x): x is Row => x !== undefined);
      const med = (k: 'direct' | 'proxy' | 'floor' | 'base' | 'nginx') => {
        const xs = same.map((x) => x[k]).filter((x): x is number => x !== undefined && Number.isFinite(x));
        return xs.length ? median(xs) : undefined;
      };
      const row: Row = { ...first, direct: med('direct'), proxy: med('proxy'), floor: med('floor'), base: med('base'), nginx: med('nginx'), roundRatios: {} };
      for (const vs of VERSUS) {
        const ratios = same.filter((x) => x.proxy !== undefined && x[vs]).map((x) => x.proxy! / x[vs]!);
        if (ratios.length) row.roundRatios![vs] = ratios;
      }
      if (first.target) {
        const values = same.map((x) => x.target?.value).filter((x): x is number => x !== undefined && Number.isFinite(x));
        const limits = same.map((x) => x.target?.limit).filter((x): x is number => x !== undefined && Number.isFinite(x));
        row.target = { ...first.target, value: values.length ? median(values) : NaN, limit: limits.length ? median(limits) : NaN };
      }
      return row;
    });
    out[name] = { rows, data: { rounds: each.map((r) => r.data) } };
  }
  return out;
}

/** What the run saw of each path's memory: RSS after each round, RSS after each scenario past the warm-up, the peak. */
interface Memory {
  rss: Record<string, number[]>;
  samples: Record<string, Sample[]>;
  peak: Record<string, number>;
}

/**
 * Memory over the run: the peak (every pack upload's and VmHWM), and RSS after every scenario
 * past the first round judged as a trend by scripts/memory-trend.ts, as the soak judges it: the
 * median slope of every pair of samples, a climb only beyond the allowance plus three times what
 * the samples' scatter could make of it, and no verdict from fewer than 20 samples (5 scenarios
 * a round: BENCH_ROUNDS >= 5). RSS after each round is kept in the data.
 */
export const RSS_TREND_ALLOWANCE_MIB_PER_MINUTE = 2;
function memoryResult(m: Memory, rounds: number): ScenarioResult {
  const rows: Row[] = [
    { id: 'memory.peak', label: 'peak RSS over the run (VmHWM, every pack upload)', unit: 'MiB', proxy: m.peak.proxy, floor: m.peak.floor, base: m.peak.base, better: 'lower', digits: 1, target: { text: '< 100 MiB', value: m.peak.proxy ?? NaN, limit: 100, op: '<' } },
  ];
  const trends = Object.fromEntries(Object.entries(m.samples).map(([k, xs]) => [k, judgeTrend(xs, { allowancePerMinute: RSS_TREND_ALLOWANCE_MIB_PER_MINUTE })]));
  const proxy = trends.proxy;
  const label = `RSS after each scenario past the first round, its trend's rise over the window (${m.samples.proxy?.length ?? 0} samples, ${rounds} rounds)`;
  const row: Row = { id: 'memory.trend', label, unit: 'MiB', proxy: proxy?.rise, floor: trends.floor?.rise, base: trends.base?.rise, better: 'lower', digits: 2 };
  if (proxy?.judged) row.target = { text: `no climb: under ${(proxy.allowed + 3 * proxy.noise).toFixed(1)} MiB (${RSS_TREND_ALLOWANCE_MIB_PER_MINUTE} MiB a minute + 3 x the scatter's ${proxy.noise.toFixed(1)})`, value: proxy.rise, limit: proxy.allowed + 3 * proxy.noise, op: '<' };
  else row.targetNote = `not judged: fewer than 20 samples (BENCH_ROUNDS >= 5; allowance ${RSS_TREND_ALLOWANCE_MIB_PER_MINUTE} MiB a minute)`;
  rows.push(row);
  return { rows, data: { rss_after_each_round_mib: m.rss, rss_trend: trends, peak_rss_mib: m.peak } };
}

function report(o: {
  cfg: ReturnType<typeof loadConfig>;
  results: Partial<Record<ScenarioName | 'memory', ScenarioResult>>;
  errors: Record<string, string>;
  nginx: boolean;
  nginxNote: string;
  nginxConfig: string | undefined;
  proxyLogLines: number;
  upStats: Record<string, number>;
  seconds: number;
}): void {
  const rows: Row[] = Object.values(o.results).flatMap((r) => r!.rows);
  const cpu = cpus();
  const when = new Date().toISOString();
  const otel = process.env.BENCH_OTEL ?? 'off';
  const header = [
    `credential-proxy bench (${o.cfg.smoke ? 'SMOKE mode: every scenario at its smallest, figures not meaningful' : o.cfg.quick ? 'QUICK mode: small sizes, short runs' : 'full'}), ${when}, ${o.seconds.toFixed(0)} s`,
    `machine: ${cpu[0]?.model ?? '?'} x ${cpu.length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; node ${process.version}`,
    `processes, all on the same ${cpu.length} cores (no pinning), all on 127.0.0.1:`,
    '  orchestrator  this process: starts everything, reads /proc, drains the proxy log pipe',
    '  upstreams     one node process: HTTPS git host and HTTPS model API; they demand the credential and check every body',
    '  load gen      one node process: node:http/https clients, the same code for every path',
    '  proxy         node dist/proxy.js (its stdout, one JSON line per request, to a pipe)',
    '  floor         node scripts/bench/floor-proxy.mjs: a bare node:http + https.request proxy, what Node itself costs',
    ...(o.cfg.baseline ? [`  base          node ${o.cfg.baseline}: the baseline bundle, configured as the proxy`] : []),
    ...(o.cfg.rounds > 1 ? [`rounds: ${o.cfg.rounds}; figures are medians of the rounds, ratios the median of the rounds' ratios (lowest-highest)`] : []),
    `  nginx         ${o.nginxNote}`,
    `tracing (BENCH_OTEL): ${otel === 'off' ? 'off' : `on, every call sampled, to a collector that ${COLLECTOR_MODES[otel]}`}`,
    'direct = the load generator straight to the HTTPS upstream, sending the credential itself; added = proxy - direct',
  ];
  const lines = [...header, '', table(rows)];
  const judged = rows.map(verdict).filter((v) => v.pass !== null);
  lines.push('', `targets: ${judged.filter((v) => v.pass).length} pass, ${judged.filter((v) => !v.pass).length} miss (goals, not assertions)`);
  for (const [k, e] of Object.entries(o.errors)) lines.push(`FAILED ${k}: ${e.split('\n')[0]}`);
  const jsonPath = join(OUT_DIR, 'bench.json');
  const svgPath = join(OUT_DIR, 'bench.svg');
  const profiles = o.cfg.cpuProf ? readdirSync(OUT_DIR).filter((f) => f.endsWith('.cpuprofile')) : [];
  writeFileSync(
    jsonPath,
    `${JSON.stringify(
      {
        when,
        mode: o.cfg.quick ? 'quick' : 'full',
        node: process.version,
        machine: { cpu: cpu[0]?.model, cores: cpu.length, mem_gib: +(totalmem() / 2 ** 30).toFixed(1) },
        placement: header.slice(2),
        config: { ...o.cfg, run: undefined },
        rows: rows.map((r) => {
          const v = verdict(r);
          return { ...r, proxy_over_direct: r.proxy !== undefined && r.direct ? r.proxy / r.direct : undefined, proxy_over_nginx: r.proxy !== undefined && r.nginx ? r.proxy / r.nginx : undefined, proxy_over_floor: r.proxy !== undefined && r.floor ? r.proxy / r.floor : undefined, proxy_over_base: r.proxy !== undefined && r.base ? r.proxy / r.base : undefined, target_pass: v.pass };
        }),
        scenarios: Object.fromEntries(Object.entries(o.results).map(([k, v]) => [k, v!.data])),
        upstream_counters: o.upStats,
        proxy_log_lines: o.proxyLogLines,
        nginx_config: o.nginxConfig,
        errors: o.errors,
        cpu_profiles: profiles,
      },
      null,
      2,
    )}\n`,
  );
  writeFileSync(svgPath, svg(rows, `credential-proxy bench, ${when.slice(0, 16).replace('T', ' ')} UTC${o.cfg.quick ? ' (quick mode)' : ''}`, `node ${process.version}, ${cpu.length} cores shared by load generator, upstreams, proxy${o.nginx ? ' and nginx' : ''}; ${o.nginxNote.split(';')[0]}`));
  lines.push(`written: ${jsonPath}`, `         ${svgPath}`);
  if (profiles.length) lines.push(`cpu profile(s): ${profiles.map((p) => join(OUT_DIR, p)).join(', ')} (summarise: tsx scripts/bench/profile-summary.ts FILE)`);
  console.log(lines.join('\n'));
}


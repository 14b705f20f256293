// A real Prometheus server (Debian package `prometheus`) scraping given loopback targets every
// 100 ms, with a temporary data directory; and a small parser of the text exposition.
// Prometheus scrapes a target first about 5 s after it starts, however short the interval: its
// target discovery sends the targets, even static ones, on a 5 s tick. A test file starts it in
// its before(), so that those seconds pass while its other tests run.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from './eventually.ts';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses exposition text into samples (comments skipped). Enough for our own output. */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparseable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    samples.push({ name: m[1]!, labels, value: m[3] === '+Inf' ? Infinity : Number(m[3]) });
  }
  return samples;
}

export function sumOf(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)).reduce((a, s) => a + s.value, 0);
}

/** `promtool check metrics` on the text; returns its exit status and output. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.error) throw new Error(`promtool could not run (install the Debian package prometheus): ${r.error.message}`);
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

function getJson(url: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (s: string) => (text += s));
      res.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // readiness endpoints answer plain text
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
    }).on('error', reject);
  });
}

export interface PromQueryResult {
  status: string;
  error?: string;
  data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
}

export interface PrometheusServer {
  readonly url: string;
  query(expr: string): Promise<PromQueryResult>;
  /** Polls an instant query until `accept` holds for its first value, bounded by the test's timeout (`signal`, t.signal; see eventually). */
  waitForValue(expr: string, accept: (v: number) => boolean, signal: AbortSignal): Promise<number>;
  close(): Promise<void>;
}

export async function startPrometheus(targets: readonly string[]): Promise<PrometheusServer> {
  const dir = mkdtempSync(join(tmpdir(), 'prometheus-'));
  writeFileSync(
    join(dir, 'prometheus.yml'),
    // 100 ms: a value the traffic left is scraped within a tenth of a second (no recording or
    // alerting rules here, so no evaluation to speed up).
    `global:\n  scrape_interval: 100ms\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: proxy\n    static_configs:\n      - targets: [${targets.map((t) => `'${t}'`).join(', ')}]\n`,
  );
  // Prometheus cannot report a port chosen by the kernel, so try a few random ones; a taken
  // port makes it exit at once, and then the next one is tried.
  for (let attempt = 0; attempt < 8; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 40000);
    const child: ChildProcess = spawn(
      'prometheus',
      [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, `data-${attempt}`)}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=error'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const url = `http://127.0.0.1:${port}`;
    const ready = await waitReady(url, exited);
    if (!ready) {
      child.kill('SIGKILL');
      if (/address already in use/.test(stderr)) continue;
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`prometheus did not start: ${stderr.trim()}`);
    }
    const query = async (expr: string) => (await getJson(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`)).body as PromQueryResult;
    return {
      url,
      query,
      async waitForValue(expr, accept, signal) {
        let last = NaN;
        const accepted = async () => {
          const v = (await query(expr)).data?.result[0]?.value[1];
          if (v === undefined) return false;
          last = Number(v);
          return accept(last);
        };
        await eventually(`${expr} to be accepted`, accepted, signal, 100, () => `last value ${last}`); // every scrape interval
        return last;
      },
      async close() {
        child.kill('SIGTERM');
        await exited;
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error('prometheus: no free port found in 8 attempts');
}

async function waitReady(url: string, exited: Promise<void>): Promise<boolean> {
  let gone = false;
  void exited.then(() => (gone = true));
  for (let i = 0; i < 400 && !gone; i++) {
    try {
      if ((await getJson(`${url}/-/ready`)).status === 200) return true;
    } catch {
      // not listening yet
    }
    await new Promise((res) => setTimeout(res, 25));
  }
  return false;
}

// The tests keep to their layers (docs/architecture.md, Tests): test/unit holds pure tests only,
// which open no socket, start no server and no process; and the test files that start the bundle
// as a child process are the ones test/support/process-tests.ts lists, no more and no fewer.
//
// Read from the imports, with the TypeScript parser: a unit test file may not import a module
// that opens sockets or starts processes (node:net, tls, http, https, http2, dgram,
// child_process, cluster, worker_threads; esbuild, whose API runs its binary), nor test support
// or a script that reaches one through what it imports (src/ included: test-listener.ts reaches
// node:http through startListener). A type-only import reaches nothing. What a unit test imports
// from src/ directly is not followed: src/ is what the unit tests test, and the credential
// kernel's own audit says which of its files may reach what.
import assert from 'node:assert/strict';
import { builtinModules } from 'node:module';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { after, test } from 'node:test';
import type * as TypeScript from 'typescript';
import { contentMemo } from '../support/content-memo.ts';
import { PROCESS_TESTS } from '../support/process-tests.ts';

const ROOT = join(__dirname, '..', '..');

/** What opens a socket or starts a process when used. */
const CAPABILITIES = ['node:net', 'node:tls', 'node:http', 'node:https', 'node:http2', 'node:dgram', 'node:child_process', 'node:cluster', 'node:worker_threads', 'esbuild'];

/** A value import: the module named, and the names taken from it ('*' for the whole module). */
interface Import {
  readonly from: string;
  readonly names: readonly string[];
}

// The parser is loaded only when an answer is not kept (as in source-shape.test.ts).
let parser: typeof TypeScript | undefined;
const typescript = (): typeof TypeScript => (parser ??= require('typescript') as typeof TypeScript);
const TS_VERSION = (JSON.parse(readFileSync(require.resolve('typescript/package.json'), 'utf8')) as { version: string }).version;
const memo = contentMemo<Import[]>('test-layers', `${TS_VERSION}\n${valueImports.toString()}`);

/**
 * Pure: the value imports of a source text: import and export-from declarations that are not
 * type-only, import() and require(); an argument that is not a string literal is '<computed>'.
 */
function valueImports(fileName: string, text: string): Import[] {
  const ts = typescript();
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const out: Import[] = [];
  const visit = (node: TypeScript.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      if (clause === undefined) out.push({ from: node.moduleSpecifier.text, names: ['*'] });
      else if (!clause.isTypeOnly) {
        const bindings = clause.namedBindings;
        const names = [...(clause.name ? ['default'] : []), ...(bindings === undefined ? [] : ts.isNamespaceImport(bindings) ? ['*'] : bindings.elements.filter((e) => !e.isTypeOnly).map((e) => (e.propertyName ?? e.name).text))];
        if (names.length > 0) out.push({ from: node.moduleSpecifier.text, names });
      }
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) && !node.isTypeOnly) {
      const clause = node.exportClause;
      const names = clause === undefined || !ts.isNamedExports(clause) ? ['*'] : clause.elements.filter((e) => !e.isTypeOnly).map((e) => (e.propertyName ?? e.name).text);
      if (names.length > 0) out.push({ from: node.moduleSpecifier.text, names });
    } else if (ts.isCallExpression(node) && (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require'))) {
      const arg = node.arguments[0];
      out.push({ from: arg !== undefined && ts.isStringLiteralLike(arg) ? arg.text : '<computed>', names: ['*'] });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** A file's value imports, its text read by `read` (a path relative to the checkout), kept by the digest of its name and text. */
function importsOf(file: string, read: (file: string) => string): Import[] {
  const text = read(file);
  return memo.answer(`${file}\0${text}`, () => valueImports(file, text));
}

/** What an import names: a capability (node: spelled in full), a file of the checkout, or another package or built-in. */
function target(from: string, importer: string): { kind: 'capability' | 'file' | 'other' | 'computed'; name: string } {
  if (from === '<computed>') return { kind: 'computed', name: from };
  const name = builtinModules.includes(from) ? `node:${from}` : from;
  if (CAPABILITIES.includes(name)) return { kind: 'capability', name };
  if (from.startsWith('.')) return { kind: 'file', name: relative(ROOT, resolve(ROOT, dirname(importer), from)) };
  return { kind: 'other', name };
}

/**
 * Pure (given `read`): why each of `unitFiles` is not a pure test: a capability it imports, or a
 * file of test/support or scripts/ it imports that reaches one (with the path it takes), or an
 * import it names by a computed expression. Empty when every file is pure.
 */
function impureUnits(unitFiles: readonly string[], read: (file: string) => string): string[] {
  /** The path from `file` to a capability through what it imports, or null. */
  const reaches = (file: string, seen: Set<string>): string | null => {
    if (seen.has(file)) return null;
    seen.add(file);
    for (const imp of importsOf(file, read)) {
      const t = target(imp.from, file);
      if (t.kind === 'capability' || t.kind === 'computed') return t.name;
      const deeper = t.kind === 'file' ? reaches(t.name, seen) : null;
      if (deeper !== null) return `${t.name} > ${deeper}`;
    }
    return null;
  };
  const problems: string[] = [];
  for (const file of unitFiles) {
    for (const imp of importsOf(file, read)) {
      const t = target(imp.from, file);
      if (t.kind === 'capability') problems.push(`${file} imports ${t.name}`);
      else if (t.kind === 'computed') problems.push(`${file} imports a module it computes (import() or require() of an expression)`);
      else if (t.kind === 'file' && !t.name.startsWith('src/')) {
        const path = reaches(t.name, new Set());
        if (path !== null) problems.push(`${file} imports ${t.name}, which reaches ${path}`);
      }
    }
  }
  return problems;
}

const readFile = (file: string): string => readFileSync(join(ROOT, file), 'utf8');
const filesIn = (dir: string, suffix: string): string[] => readdirSync(join(ROOT, dir)).filter((f) => f.endsWith(suffix)).sort().map((f) => `${dir}/${f}`);

test('test/unit holds pure tests only: no unit test file imports a module that opens sockets or starts processes, nor test support or a script that reaches one', () => {
  assert.deepEqual(impureUnits(filesIn('test/unit', '.ts'), readFile), [], 'a test that needs a socket, a server or a process belongs in test/integration');
});

test('the purity check finds each way a unit test reaches a socket or a process, and lets type-only imports and src/ pass (the test can fail)', () => {
  const files: Record<string, string> = {
    'test/unit/net.test.ts': `import { connect } from 'node:net';`,
    'test/unit/bare.test.ts': `import * as cp from 'child_process';`,
    'test/unit/required.test.ts': `const https = require('node:https');`,
    'test/unit/dynamic.test.ts': `test('x', async () => { await import('node:tls'); });`,
    'test/unit/computed.test.ts': `const name = 'node:' + 'net'; test('x', async () => { await import(name); });`,
    'test/unit/builds.test.ts': `import { build } from 'esbuild';`,
    'test/unit/support.test.ts': `import { helper } from '../support/pure-front.ts';`,
    'test/support/pure-front.ts': `export { helper } from './server.ts';`,
    'test/support/server.ts': `import { createServer } from 'node:http'; export const helper = createServer;`,
    'test/unit/script.test.ts': `import { run } from '../../scripts/runner.ts';`,
    'scripts/runner.ts': `import { spawnSync } from 'node:child_process'; export const run = spawnSync;`,
    'test/unit/listener.test.ts': `import { start } from '../support/listener.ts';`,
    'test/support/listener.ts': `import { startListener } from '../../src/server.ts'; export const start = startListener;`,
    'src/server.ts': `import { createServer } from 'node:http'; export const startListener = createServer;`,
    'test/unit/pure.test.ts': [
      `import type { Socket } from 'node:net';`,
      `import { type Server, type IncomingMessage } from 'node:http';`,
      `import { createHash } from 'node:crypto';`,
      `import { readFileSync } from 'node:fs';`,
      `import { listenErrorMessage } from '../../src/server.ts';`,
      `import type { TestPki } from '../support/server.ts';`,
      `export type { Socket } from 'node:net';`,
    ].join('\n'),
  };
  const read = (file: string): string => files[file] ?? assert.fail(`read ${file}`);
  const units = Object.keys(files).filter((f) => f.startsWith('test/unit/'));
  assert.deepEqual(impureUnits(units, read).sort(), [
    'test/unit/bare.test.ts imports node:child_process',
    'test/unit/builds.test.ts imports esbuild',
    'test/unit/computed.test.ts imports a module it computes (import() or require() of an expression)',
    'test/unit/dynamic.test.ts imports node:tls',
    'test/unit/listener.test.ts imports test/support/listener.ts, which reaches src/server.ts > node:http',
    'test/unit/net.test.ts imports node:net',
    'test/unit/required.test.ts imports node:https',
    'test/unit/script.test.ts imports scripts/runner.ts, which reaches node:child_process',
    'test/unit/support.test.ts imports test/support/pure-front.ts, which reaches test/support/server.ts > node:http',
  ]);
});

/**
 * Pure (given `read`): the test files that start the bundle through test/support/proxy-process.ts:
 * startProxy or runProxyCommand imported, or startBothListeners asked for the bundle.
 */
function bundleStarters(testFiles: readonly string[], read: (file: string) => string): string[] {
  return testFiles.filter((file) => {
    const imports = importsOf(file, read).map((imp) => ({ ...imp, to: target(imp.from, file).name }));
    const takes = (module: string, name: string) => imports.some((imp) => imp.to === module && (imp.names.includes(name) || imp.names.includes('*')));
    return takes('test/support/proxy-process.ts', 'startProxy') || takes('test/support/proxy-process.ts', 'runProxyCommand') || (takes('test/support/both-listeners.ts', 'startBothListeners') && /\bbundle:\s*true\b/.test(read(file)));
  });
}

test('the process tests are the list in test/support/process-tests.ts: every test file that starts the bundle is on it, every file on it starts the bundle, and none is in test/unit', () => {
  const testFiles = [...filesIn('test/unit', '.test.ts'), ...filesIn('test/integration', '.test.ts')];
  const listed = PROCESS_TESTS.map((t) => t.file);
  assert.deepEqual(listed.filter((f) => !existsSync(join(ROOT, f))), [], 'every file listed exists');
  assert.deepEqual(listed.filter((f) => f.startsWith('test/unit/')), [], 'a process test is not a unit test');
  assert.equal(new Set(listed).size, listed.length, 'each file once');
  const starters = bundleStarters(testFiles, readFile);
  assert.deepEqual(starters.filter((f) => !listed.includes(f)), [], 'a test file that starts the bundle: list it in test/support/process-tests.ts with why, or serve the proxy in process (startServe) or on the harness');
  const viaProxyProcess = PROCESS_TESTS.filter((t) => t.how === 'proxy-process').map((t) => t.file);
  assert.deepEqual(viaProxyProcess.filter((f) => !starters.includes(f)), [], 'listed as starting the bundle through proxy-process.ts, and it does not');
  // A file that runs the bundle's command line itself (readme-blocks, deploy-kit-serve) names the file it runs.
  const byCommand = PROCESS_TESTS.filter((t) => t.how === 'command').map((t) => t.file);
  assert.deepEqual(byCommand.filter((f) => !importsOf(f, readFile).some((imp) => target(imp.from, f).name === 'test/support/proxy-process.ts' && imp.names.includes('BUNDLE'))), []);
});

test('the process-test check finds a file that starts the bundle, through either helper or the both-listeners set-up, and passes one that serves in process (the test can fail)', () => {
  const files: Record<string, string> = {
    'test/integration/a.test.ts': `import { startProxy } from '../support/proxy-process.ts';`,
    'test/integration/b.test.ts': `import { runProxyCommand, type ProxyProcess } from '../support/proxy-process.ts';`,
    'test/integration/c.test.ts': `import { startBothListeners } from '../support/both-listeners.ts';\nconst both = startBothListeners({ bundle: true });`,
    'test/integration/d.test.ts': `import { startBothListeners } from '../support/both-listeners.ts';\nimport type { ProxyProcess } from '../support/proxy-process.ts';\nconst both = startBothListeners({});`,
    'test/integration/e.test.ts': `import { startServe } from '../support/serve-in-process.ts';`,
  };
  assert.deepEqual(bundleStarters(Object.keys(files), (f) => files[f]!), ['test/integration/a.test.ts', 'test/integration/b.test.ts', 'test/integration/c.test.ts']);
});

after(() => memo.save());

// scripts/audit-bundle.mjs against the real bundle, and against tampered copies of it. The
// command itself runs twice (a clean bundle, a missing file); every other case calls the
// function it prints, in process, which is the same report without a process start each.
// The tamperings were written against the hand-written tokenizer the audit was before it read the
// bundle with TypeScript's parser: each is still caught, by the finding the parser's reading
// gives (where the tokenizer could only say it could not tell, the code after is read and judged).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { after, test } from 'node:test';
import type { Parsed } from '../../scripts/audit-bundle.mjs';
import { BUNDLE, ROOT } from '../support/proxy-process.ts';

const SCRIPT = join(ROOT, 'scripts', 'audit-bundle.mjs');
const dir = mkdtempSync(join(tmpdir(), 'audit-bundle-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Audit {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The audit as `npm run audit:bundle` runs it: the command, in a process of its own. */
function auditCommand(file?: string): Audit {
  const r = spawnSync(process.execPath, [SCRIPT, ...(file === undefined ? [] : [file])], { cwd: ROOT, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * The last text audited in process, with its parse: each tampered copy is an edit of the real
 * bundle, which the audit reads as an edit of the last (TypeScript's incremental parser) instead
 * of parsing half a megabyte again; 'an audit of an edit reads as an audit of the whole' below
 * holds the two readings to each other.
 */
let last: Parsed | undefined;

/** The same audit in process: the function the command prints. */
async function audit(file?: string): Promise<Audit> {
  const { auditFile } = await import('../../scripts/audit-bundle.mjs');
  const previous = last;
  last = undefined; // consumed by the reparse, whatever comes of it
  const r = auditFile(file, previous);
  last = r.parsed;
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

let copies = 0;
let bundleText: string | undefined;
/** A copy of the real bundle with `edit` applied, in the temp dir. */
function tampered(edit: (bundle: string) => string): string {
  const file = join(dir, `proxy-${++copies}.js`);
  writeFileSync(file, edit((bundleText ??= readFileSync(BUNDLE, 'utf8'))));
  return file;
}

/**
 * The src/**.ts files main.ts reaches through value imports, less those the build erases: type-only
 * imports, and files that export only types and const enums (whose values the bundle inlines,
 * each with its name in a comment: `34 /* QUOTE *\/`).
 */
function reachableFromMain(): string[] {
  const seen = new Set<string>();
  const erased = (source: string) => /^export\s+(const enum|type|interface) /m.test(source) && !/^export\s+(?!const enum |type |interface )/m.test(source);
  const visit = (file: string) => {
    if (seen.has(file)) return;
    const source = readFileSync(join(ROOT, file), 'utf8');
    if (file !== 'src/main.ts' && erased(source)) return;
    seen.add(file);
    for (const m of source.matchAll(/^(?:import|export)\s+(type\s+)?(?:([^;]*?)\s+from\s+)?'(\.{1,2}\/[\w./-]+\.ts)';/gm)) {
      const typeOnly = m[1] !== undefined || (m[2] !== undefined && /^\{[^}]*\}$/.test(m[2]) && m[2].slice(1, -1).split(',').every((s) => /^\s*(type\s|$)/.test(s)));
      if (!typeOnly) visit(posix.normalize(posix.join(posix.dirname(file), m[3]!)));
    }
  };
  visit('src/main.ts');
  return [...seen].sort();
}

test('the real bundle passes: only node: built-ins, every module from src/, and the report lists them', () => {
  const r = auditCommand();
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /findings: {2}none/);
  assert.match(r.stdout, /size: +\d+ bytes \(\d+\.\d KiB\)/);
  assert.match(r.stdout, /built-ins: node:\S+/);
  const listed = [...r.stdout.matchAll(/^ {4}(src\/\S+\.ts)$/gm)].map((m) => m[1]!);
  const reachable = reachableFromMain();
  for (const core of ['src/main.ts', 'src/http/server.ts', 'src/http/forward.ts', 'src/git/proxy.ts', 'src/gateway/handler.ts']) assert.ok(reachable.includes(core), core);
  assert.deepEqual(reachable.filter((f) => !listed.includes(f)), [], 'every file main.ts reaches is listed');
  const onDisk = (readdirSync(join(ROOT, 'src'), { recursive: true }) as string[]).map((f) => `src/${f}`);
  assert.deepEqual(listed.filter((f) => !onDisk.includes(f)), [], 'every listed file exists in src/');
});

test('the default path is dist/proxy.js and an explicit path gives the same verdict', async () => {
  const r = await audit(BUNDLE);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.equal((await audit()).stdout.replace(/^audit-bundle: .*\n/, ''), r.stdout.replace(/^audit-bundle: .*\n/, ''));
});

test('a missing file is a usage error (exit 2)', () => {
  const r = auditCommand(join(dir, 'no-such-bundle.js'));
  assert.equal(r.code, 2);
  assert.match(r.stderr, /cannot read/);
});

const TAMPERINGS: readonly { name: string; append: string; finding: RegExp }[] = [
  { name: 'require of a package', append: 'require("left-pad");', finding: /require\("left-pad"\) is not a node: built-in/ },
  { name: 'require of a built-in without the node: prefix', append: 'require("fs");', finding: /require\("fs"\) is not a node: built-in/ },
  { name: 'require of a built-in that runs code', append: 'require("node:child_process");', finding: /require\(\"node:child_process\"\): a built-in no list of scripts\/kernel\.json grants/ },
  { name: 'require of node:vm', append: 'require("node:vm").runInThisContext("1");', finding: /require\(\"node:vm\"\): a built-in no list of scripts\/kernel\.json grants/ },
  { name: 'dynamic require with a variable', append: 'const name = "left-pad"; require(name);', finding: /require with an argument that is not one string literal/ },
  { name: 'dynamic require with a concatenation', append: 'require("node:" + "fs");', finding: /require with an argument that is not one string literal/ },
  { name: 'dynamic require with a template literal', append: 'require(`left-pad`);', finding: /require with an argument that is not one string literal/ },
  { name: 'require with an escaped literal', append: 'require("left\\x2dpad");', finding: /require\(\"left-pad\"\) is not a node: built-in/ },
  { name: 'aliased require', append: 'const r = require; r("left-pad");', finding: /require used other than as a direct call/ },
  { name: 'require.resolve', append: 'require.resolve("left-pad");', finding: /require used other than as a direct call/ },
  { name: 'module.require', append: 'module.require("left-pad");', finding: /module: the module system/ },
  { name: 'createRequire', append: 'const { createRequire: c } = require("node:module");', finding: /require\(\"node:module\"\): a built-in no list of scripts\/kernel\.json grants/ },
  { name: 'dynamic import of a package', append: 'import("left-pad");', finding: /a dynamic import\(\) of left-pad/ },
  { name: 'dynamic import with a variable', append: 'const m = "x"; import(m);', finding: /a dynamic import\(\): the bundle loads built-ins by esbuild's require alone/ },
  { name: 'eval(', append: 'eval("1 + 1");', finding: /: eval: code from a string$/m },
  { name: 'indirect eval', append: '(0, eval)("1");', finding: /: eval: code from a string$/m },
  { name: 'eval through a computed member', append: 'globalThis["eval"]("1");', finding: /globalThis, the global object/ },
  { name: 'new Function(', append: 'new Function("return 1")();', finding: /the Function constructor: code from a string/ },
  { name: 'Function( without new', append: 'Function("return 1")();', finding: /the Function constructor: code from a string/ },
  { name: 'process.binding', append: 'process.binding("fs");', finding: /process\.binding/ },
  { name: 'process.dlopen', append: 'process.dlopen(module, "/tmp/x.node");', finding: /process\.dlopen/ },
  { name: 'process["binding"]', append: 'process["binding"]("fs");', finding: /process used other than as process\.<member>/ },
  { name: 'an identifier spelled with a unicode escape', append: '\\u0065val("1");', finding: /: eval: code from a string$/m },
  { name: 'a module from node_modules', append: '\n// node_modules/left-pad/index.js\nvar leftPad = 1;', finding: /module node_modules\/left-pad\/index\.js is outside src\// },
  { name: 'a module from test/', append: '\n// test/support/tls.ts\nvar x = 1;', finding: /module test\/support\/tls\.ts is outside src\// },
  { name: 'an unterminated template literal (the scan fails closed)', append: 'const t = `abc', finding: /cannot parse: Unterminated template literal/ },
  // Text the scan once read otherwise than node does, each appended code that node runs (an
  // eval after the scan's misreading): read as node reads it, or a finding where it cannot tell.
  { name: 'a line comment ended by CR, then eval(', append: '// note\reval("1");', finding: /: eval: code from a string$/m },
  { name: 'a line comment ended by U+2028, then eval(', append: '// note\u2028eval("1");', finding: /: eval: code from a string$/m },
  { name: 'eval followed by U+00A0, a space to JavaScript', append: 'eval\u00a0("1");', finding: /a character outside ASCII in code \(U\+00A0\)/ },
  { name: 'require followed by U+3000, a space to JavaScript', append: 'require\u3000("node:child_process");', finding: /a character outside ASCII in code \(U\+3000\)/ },
  { name: 'an HTML-like comment --> that makes the rest look like a template', append: '\n--> `\neval("1");\n// `', finding: /an HTML-like comment/ },
  { name: 'an HTML-like comment <!--', append: '<!-- x\neval("1");', finding: /an HTML-like comment/ },
  { name: 'a regular expression after if (...) holding a quote', append: 'if (1) /"/; eval("1"); //"', finding: /: eval: code from a string$/m },
  { name: 'a regular expression after for await (...) holding a quote', append: '(async () => { for await (const x of []) /"/; eval("1"); //"\n})();', finding: /: eval: code from a string$/m },
  { name: 'a / after a block, a regular expression holding a quote', append: '{}\n/"/; eval("1"); //"', finding: /: eval: code from a string$/m },
  { name: 'a division after a member named return', append: 'var o = { return: 4 }; o.return / 2; eval("1"); /x/;', finding: /: eval: code from a string$/m },
  { name: 'a division after a variable named of', append: 'var of = 4; of / 2; eval("1"); /x/;', finding: /: eval: code from a string$/m },
  { name: 'a division after a postfix ++', append: 'var n = 1; n++ / 2; eval("1"); /x/;', finding: /: eval: code from a string$/m },
  { name: 'a member after a number that ends in a dot (1..e+require)', append: '1..e+require("node:child_process");', finding: /require\(\"node:child_process\"\): a built-in no list/ },
  { name: 'a regular expression after extends holding a quote', append: 'class A extends /"/.constructor {}; eval("1"); //"', finding: /: eval: code from a string$/m },
  { name: 'a / at the start of a line after a declaration (an inserted semicolon)', append: 'var x\n/"/; eval("1"); //"', finding: /: eval: code from a string$/m },
  { name: 'a regular expression right after ${ holding a quote', append: '`${/"/}`; eval("1"); //"}`', finding: /: eval: code from a string$/m },
  { name: 'a private name spelled like a keyword before a division', append: 'class B { #return = 4; m() { return this.#return / 2; } } new B().m(); eval("1"); /x/;', finding: /: eval: code from a string$/m },
  { name: 'a + after a postfix ++ before a regular expression (a+++/re/)', append: 'var a = 1; a+++/"/.source.length; eval("1"); //"', finding: /: eval: code from a string$/m },
  { name: 'a spread of typeof before a regular expression', append: '[...typeof /"/]; eval("1"); //"', finding: /: eval: code from a string$/m },
  { name: 'process.getBuiltinModule', append: 'process.getBuiltinModule("node:child_process");', finding: /process\.getBuiltinModule: not a member the lists grant/ },
  { name: 'module.constructor._load', append: 'module.constructor._load("node:child_process");', finding: /module: the module system/ },
  { name: 'process?.binding', append: 'process?.binding("fs");', finding: /process\.binding: not a member the lists/ },
  { name: 'process destructured', append: 'const { binding: b } = process;', finding: /process used other than as process\.<member>/ },
  { name: 'Function as a member of the global object', append: 'const g = global; g.Function("return 1")();', finding: /global, the global object/ },
  { name: 'the Function constructor through [].constructor', append: '[].constructor.constructor("return 1")();', finding: /the member constructor: from any value it reaches a constructor/ },
  { name: 'a computed member spelled as a template', append: 'global[`eval`]("1");', finding: /a string spelling eval/ },
  { name: 'a computed member built by concatenation', append: 'global["ev" + "al"]("1");', finding: /a string spelling eval/ },
  { name: 'a computed member spelled with an escape', append: 'global["ev\\x61l"]("1");', finding: /a string spelling eval/ },
  // A third review's: each ran under node, silent in the audit before.
  { name: 'a regular expression after a prefix ++ holding a quote', append: 'void ++/"/.lastIndex; eval("1"); //"', finding: /: eval: code from a string$/m },
  { name: 'a destructured string key spelling eval', append: 'const { "eval": e } = global; e("1");', finding: /a string spelling eval/ },
  { name: 'process reached through a string key', append: 'global["process"]["getBuiltinModule"]("node:child_process");', finding: /a string spelling process/ },
  { name: 'constructor destructured from Object', append: 'const { constructor: F } = Object; F("return 1")();', finding: /the member constructor: from any value it reaches a constructor/ },
  { name: 'a crypto engine, which loads native code', append: 'require("node:crypto").setEngine("/tmp/x.so");', finding: /require\(\"node:crypto\"\) other than as esbuild writes it/ },
  { name: 'process.kill with SIGUSR1, which opens the inspector', append: 'process.kill(process.pid, "SIGUSR1");', finding: /process\.kill: not a member the lists/ },
  { name: 'a variable named of indexed by concatenated strings', append: 'const of = global; of["ev" + "al"]("1");', finding: /a string spelling eval/ },
  { name: 'a computed member spelled by a regular expression', append: 'global[/eval/.source]("1");', finding: /global, the global object/ },
  // A fourth review's.
  { name: 'a string spelling eval with an escape', append: 'Object.getOwnPropertyDescriptor(global, "ev\\x61l").value("1");', finding: /a string spelling eval/ },
  { name: 'a string key spelling eval across a line continuation', append: 'const { "ev\\\nal": e } = global;', finding: /a string spelling eval/ },
  { name: 'strings joined into eval outside brackets', append: 'void ("ev" + "al");', finding: /a string spelling eval/ },
  { name: 'a destructuring key computed from strings', append: 'const { ["ev" + "al"]: e } = global; e("1");', finding: /a string spelling eval/ },
  { name: 'require of node:process, process under another name', append: 'const p = require("node:process"); p.kill(p.pid, 10);', finding: /require\(\"node:process\"\): a built-in no list/ },
  { name: 'a tls context loading a client certificate engine', append: 'require("node:tls").createSecureContext().context.setClientCertEngine("/tmp/x.so");', finding: /require\(\"node:tls\"\) other than as esbuild writes it/ },
  // A fifth review's.
  { name: 'kill reached through the process that its on() returns (SIGUSR1 as a number opens the inspector)', append: 'process .on("x", () => 0).kill(process.pid, 10);', finding: /process\.on\(\.\.\.\) used for its result, which is process itself/ },
  { name: 'a string naming the process\'s memory file', append: 'require("node:fs").openSync("/proc/" + "self/mem", "r+");', finding: /require\(\"node:fs\"\) other than as esbuild writes it/ },
  // The parser's own: scopes as JavaScript opens them, esbuild's bindings of the built-ins, the
  // syntax TypeScript reads and node does not.
  { name: 'a parameter default naming a variable its body declares (which it cannot see)', append: 'function f(a = globalThis) { var globalThis; return a; }', finding: /globalThis, the global object/ },
  { name: 'process shadowed in a block, then used outside it', append: '{ let process = 1; } process.binding("fs");', finding: /process\.binding: not a member the lists/ },
  { name: "a built-in's binding passed on", append: 'const copy = import_node_fs; copy.openSync("/x", "r");', finding: /import_node_fs \(node:fs\) used other than as import_node_fs\.<member>/ },
  { name: "a built-in's member off the list", append: 'import_node_fs.openSync("/x", "r");', finding: /node:fs openSync: not a member the lists of scripts\/kernel\.json grant/ },
  { name: "a built-in's binding declared again", append: 'var import_node_fs = require("node:fs");', finding: /import_node_fs: a built-in's binding declared twice/ },
  { name: 'TypeScript syntax node reads otherwise (an as expression)', append: 'var t = process as any;', finding: /TypeScript syntax \(AsExpression\)/ },
  { name: 'a with statement', append: 'with ({}) { x; }', finding: /a with statement/ },
  { name: 'JSX, which TypeScript reads in a .js file and node does not', append: 'var j = <a>{eval}</a>;', finding: /TypeScript syntax \(JsxElement\)/ },
  { name: 'an export modifier in a CommonJS bundle', append: 'export function f() {}', finding: /an import or export declaration in a CommonJS bundle/ },
  { name: 'a template of literals spelling constructor', append: 'var k = `constr${"uct"}or`;', finding: /a string spelling constructor/ },
  { name: 'the Function constructor found among property descriptors', append: 'Object.values(Object.getOwnPropertyDescriptors(Object.getPrototypeOf(() => 0)));', finding: /Object\.getOwnPropertyDescriptors: not among the members of Object the lists grant/ },
];

for (const t of TAMPERINGS) {
  test(`a bundle with ${t.name} appended fails the audit`, async () => {
    const r = await audit(tampered((b) => `${b}\n${t.append}\n`));
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stdout, t.finding);
    assert.match(r.stderr, /finding\(s\)/);
  });
}

test('a bundle whose hashbang line is ended by CR, with code after it, fails the audit', async () => {
  const r = await audit(tampered((b) => b.replace(/^#!\/usr\/bin\/env node/, '$&\reval("1");')));
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stdout, /: eval: code from a string$/m);
});

test('a bundle with code before "use strict" (the whole file then runs outside strict mode) fails the audit', async () => {
  const r = await audit(tampered((b) => b.replace('"use strict";\n', 'void 0;\n"use strict";\n')));
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stdout, /the code does not begin with "use strict";/);
});

test('a bundle without module comments fails the audit', async () => {
  const r = await audit(tampered((b) => b.replace(/^\/\/ src\/\S+\.ts$/gm, '')));
  assert.equal(r.code, 1);
  assert.match(r.stdout, /no module comments/);
});

test('calls spelled inside strings, comments, templates and regular expressions are not findings', async () => {
  const harmless = [
    `const a = "require('left-pad') eval( new Function( process.binding";`,
    `const b = 'import("x")';`,
    '// eval("x"); require("left-pad");',
    '/* new Function("x") */',
    'const c = `${1 + 2} require("left-pad") ${`eval(${"x"})`}`;',
    'const d = /require\\("left-pad"\\)|eval\\(/.test(a) ? 1 / 2 : 3;',
  ].join('\n');
  const r = await audit(tampered((b) => `${b}\n${harmless}\n`));
  assert.equal(r.code, 0, r.stdout);
});

test('an audit of an edit reads as an audit of the whole: the same findings, whether the text is parsed whole or as an edit of the last one audited', async () => {
  const { auditBundle, bundleAllowlist } = await import('../../scripts/audit-bundle.mjs');
  const allow = bundleAllowlist(JSON.parse(readFileSync(join(ROOT, 'scripts', 'kernel.json'), 'utf8')));
  const bundle = readFileSync(BUNDLE, 'utf8');
  const edits = [
    ...TAMPERINGS.filter((_, i) => i % 30 === 0).map((t) => `${bundle}\n${t.append}\n`),
    bundle.replace('"use strict";\n', 'void 0;\n"use strict";\n'),
    `${bundle}\n<!-- x\neval("1");\n`,
  ];
  let previous: Parsed | undefined;
  for (const text of edits) {
    const edited = auditBundle(text, allow, previous);
    previous = edited.parsed;
    assert.deepEqual(edited.findings, auditBundle(text, allow).findings, text.slice(bundle.length - 20));
  }
});

#!/usr/bin/env node
// The source audit: what each file of src/ reaches, read by TypeScript's parser and checker, held
// against scripts/kernel.json. build.mjs runs it before it writes dist/proxy.js, and fails on any
// finding, naming the file and the line; `npm run audit:source` prints the report a reviewer
// reads beside the kernel (SECURITY.md, "How to review").
//
//   node scripts/audit-source.mjs           the report; exit 0: no finding, 1: findings
//
// What a file may reach is an allowlist (scripts/kernel.json), never a list of forbidden names:
// - modules: relative imports of src/ files, and node: built-ins by name ({ readFileSync }), each
//   member on the list; the capability modules (sockets, files, processes, code loading: node:net,
//   tls, http, https, http2, dgram, fs, child_process, worker_threads, vm, inspector, module,
//   cluster, dns) only in a kernel file, and only the members granted to it. A type-only import
//   reaches nothing. Not allowed anywhere: a dynamic import(), `import x = require()`, a built-in
//   imported whole (default or namespace), a package, a built-in without its node: prefix;
// - globals: a name no declaration of src/ resolves (the checker says which) is a global, judged
//   by the rules the bundle audit shares (audit-rules.mjs): on the list, its members too (Object:
//   assign, entries, ...; getPrototypeOf is a finding), used only as X.member, a call, new,
//   instanceof, typeof or a class's base ("passedOn" aside: .filter(Boolean)); eval, Function,
//   globalThis, require, module on no list; no computed member of a global (Math[k]);
// - process: only process.<member>, the member on the list (the file's own grants added), and
//   process.env only in the files scripts/kernel.json names for the environment; process.on(...)
//   not used for its result (process itself);
// - a secret's value: the reader kernel.json names (src/http/secret-value.ts: reveal), resolved by
//   the checker through every import and re-export: a file outside the kernel that refers to it,
//   or imports whole a module that exports it, is a finding;
// - members that reach a constructor from any value (x.constructor, x.__proto__, and the same as
//   x["constructor"] or a destructured key): findings everywhere.
// It reports, for the reviewer and without judging them, every URL and host name written in the
// code (a new one shows in the report), each kernel file's reach, and what the rest reaches.
//
// The program is src/ alone, without the language's declarations or Node's (noLib, no types): a
// name the checker cannot resolve is exactly a global, and the program is a third of the one the
// type check builds. A run's result is kept (node_modules/.cache/audit-source), keyed by the
// digest of src/, kernel.json, this script and its rules and the compiler's version, so that a build of
// unchanged sources reuses it without loading the compiler.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chainsProcess, constructorMember, judgeGlobal, UNLISTED } from './audit-rules.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const DECLARATION_FILE = 'scripts/kernel.json';
const BUILTINS = new Set(builtinModules);
/** Runs kept: the checkout's, and a few copies' (the tests build copies of the checkout). */
const KEPT_RUNS = 4;
const HOW = `scripts/kernel.json says what each file may reach (SECURITY.md, "How to review")`;

/** The declaration: scripts/kernel.json, checked for its own shape (a malformed one fails the build). */
export function readDeclaration(root) {
  const file = path.join(root, DECLARATION_FILE);
  const d = JSON.parse(readFileSync(file, 'utf8'));
  const problems = [];
  const isList = (x) => Array.isArray(x) && x.every((s) => typeof s === 'string');
  if (typeof d.kernel !== 'object' || d.kernel === null || !Object.values(d.kernel).every((why) => typeof why === 'string' && why.length > 0)) problems.push('"kernel" maps each kernel file to why it is one');
  if (!isList(d.capabilityModules)) problems.push('"capabilityModules" is a list of built-ins');
  if (!isList(d.environment)) problems.push('"environment" is a list of files');
  if (typeof d.secretReader !== 'string' || !/^src\/\S+\.ts:\w+$/.test(d.secretReader)) problems.push('"secretReader" is FILE:NAME');
  const e = d.everywhere;
  if (typeof e?.modules !== 'object' || typeof e?.globals !== 'object' || !isList(e?.process) || !isList(e?.passedOn)) problems.push('"everywhere" has modules, globals, passedOn and process');
  for (const [file, grant] of Object.entries(d.files ?? {})) {
    for (const module of Object.keys(grant.modules ?? {})) {
      if (d.capabilityModules?.includes(module.replace(/^node:/, '')) && !(file in (d.kernel ?? {}))) problems.push(`"files" grants ${module} to ${file}, which is not in the kernel`);
    }
  }
  if (problems.length > 0) throw new Error(`${DECLARATION_FILE}: ${problems.join('; ')}`);
  return d;
}

/** Every .ts file under src/, relative to root, `/`-separated, sorted. */
function sourceFiles(root) {
  return readdirSync(path.join(root, 'src'), { recursive: true })
    .map((f) => `src/${f.split(path.sep).join('/')}`)
    .filter((f) => f.endsWith('.ts'))
    .sort();
}

/**
 * The audit's program: src/ without the language's declarations or Node's, relative imports
 * resolved to the file they name (no probing), JSDoc not parsed.
 */
export function sourceProgram(ts, root) {
  const options = { noLib: true, types: [], target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, allowImportingTsExtensions: true, noEmit: true };
  const host = ts.createCompilerHost(options);
  host.jsDocParsingMode = ts.JSDocParsingMode.ParseNone;
  host.resolveModuleNameLiterals = (literals, containingFile) =>
    literals.map((literal) => {
      if (!literal.text.startsWith('.')) return { resolvedModule: undefined };
      const resolved = path.resolve(path.dirname(containingFile), literal.text);
      return { resolvedModule: resolved.endsWith('.ts') && existsSync(resolved) ? { resolvedFileName: resolved, extension: ts.Extension.Ts, isExternalLibraryImport: false } : undefined };
    });
  return ts.createProgram({ rootNames: sourceFiles(root).map((f) => path.join(root, f)), options, host });
}

/**
 * Audits a program's src/ files against the declaration. Returns { findings: [{ file, line,
 * message }], files: { [file]: Reach } }, Reach = { lines, modules: { [module]: [members] },
 * globals: [names], process: [members], hosts: [texts], reveals: number, kernelUses: [the kernel
 * exports it imports, file:name] }.
 */
export function auditProgram(ts, program, root, declaration) {
  const checker = program.getTypeChecker();
  const srcDir = path.join(root, 'src') + path.sep;
  const rel = (fileName) => path.relative(root, fileName).split(path.sep).join('/');
  const inSrc = (symbol) => symbol?.declarations?.some((d) => d.getSourceFile().fileName.startsWith(srcDir)) === true;
  const target = (symbol) => (symbol && symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol);
  const kernel = declaration.kernel;
  const capability = new Set(declaration.capabilityModules.map((m) => `node:${m}`));
  const findings = [];
  const files = {};

  const [readerFile, readerName] = declaration.secretReader.split(':');
  const readerSource = program.getSourceFile(path.join(root, readerFile));
  const readerModule = readerSource && checker.getSymbolAtLocation(readerSource);
  const reader = readerModule && target(checker.getExportsOfModule(readerModule).find((s) => s.getName() === readerName));
  if (!reader) findings.push({ file: DECLARATION_FILE, line: 1, message: `the secret reader ${declaration.secretReader} is not an export of src/: the audit cannot tell who reads a secret's value` });
  const exportsReader = (moduleSymbol) => moduleSymbol !== undefined && checker.getExportsOfModule(moduleSymbol).some((s) => target(s) === reader);

  for (const sf of program.getSourceFiles()) {
    if (!sf.fileName.startsWith(srcDir) || sf.isDeclarationFile) continue;
    const file = rel(sf.fileName);
    const isKernel = file in kernel;
    const grant = declaration.files?.[file] ?? {};
    // `environment`: the file names the type of the environment object main.ts hands on (it can
    // read any variable by name): reported, for the reviewer, not judged.
    const reach = { lines: sf.getLineStarts().length - (sf.text.endsWith('\n') ? 1 : 0), modules: {}, globals: new Set(), process: new Set(), hosts: new Set(), reveals: 0, kernelUses: new Set(), environment: /\bProcessEnv\b/.test(sf.text) };
    files[file] = reach;
    const lineOf = (node) => sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
    const find = (node, message) => findings.push({ file, line: lineOf(node), message });
    const membersOf = (module) => grant.modules?.[module] ?? declaration.everywhere.modules[module];
    const globalMembers = (name) => grant.globals?.[name] ?? declaration.everywhere.globals[name];

    /** A module specifier: a src/ file, or a built-in on this file's list. Returns the built-in's name, or undefined. */
    const checkSpecifier = (node, spec) => {
      if (spec.startsWith('.')) {
        if (!path.resolve(path.dirname(sf.fileName), spec).startsWith(srcDir)) find(node, `imports ${spec}, outside src/`);
        return undefined;
      }
      if (!spec.startsWith('node:') || !BUILTINS.has(spec.slice(5))) {
        find(node, `imports "${spec}": only files of src/ and node: built-ins (with the prefix) may be imported`);
        return undefined;
      }
      if (capability.has(spec) && !isKernel) {
        find(node, `imports ${spec}, a capability module (sockets, files, processes, code loading): only a file of the credential kernel may. Keep the work in a kernel file, or make this file one: add it to "kernel" in ${DECLARATION_FILE} with why, and grant it the members under "files" (a reviewer then reads it line by line)`);
        return undefined;
      }
      if (membersOf(spec) === undefined) {
        find(node, `imports ${spec}, which no list in ${DECLARATION_FILE} grants ${capability.has(spec) ? 'this file ("files")' : '("everywhere".modules)'}: add it there with the members used, for review`);
        return undefined;
      }
      return spec;
    };

    const checkImport = (node) => {
      const spec = node.moduleSpecifier.text;
      const clause = node.importClause;
      if (clause?.isTypeOnly) return;
      const named = clause?.namedBindings && ts.isNamedImports(clause.namedBindings) ? clause.namedBindings.elements.filter((e) => !e.isTypeOnly) : [];
      const whole = clause?.name !== undefined || (clause?.namedBindings !== undefined && ts.isNamespaceImport(clause.namedBindings));
      if (clause !== undefined && !whole && named.length === 0) return; // `import { type A }`: types only
      if (spec.startsWith('.')) {
        checkSpecifier(node.moduleSpecifier, spec);
        const moduleSymbol = checker.getSymbolAtLocation(node.moduleSpecifier);
        if (whole && !isKernel && exportsReader(moduleSymbol)) find(node, `imports ${spec} whole, which exports the secret reader (${declaration.secretReader}): import what is needed by name`);
        for (const e of named) noteImported(e, target(checker.getSymbolAtLocation(e.name)));
        return;
      }
      const module = checkSpecifier(node.moduleSpecifier, spec);
      if (module === undefined) return;
      if (whole) return find(node, `imports ${spec} whole: import a built-in by name ({ member }), so that each member is on the list`);
      const allowed = membersOf(module);
      for (const e of named) {
        const member = (e.propertyName ?? e.name).text;
        addTo(reach.modules, module, member);
        if (!allowed.includes(member)) find(e, `imports ${member} from ${module}, which ${DECLARATION_FILE} does not grant ${capability.has(module) ? 'this file ("files")' : '("everywhere".modules)'}: add it there, for review`);
      }
    };

    /** An import or re-export by name of a src/ file's export: the secret reader outside the kernel, and the kernel's interface. */
    const noteImported = (node, symbol) => {
      if (symbol === reader && reader !== undefined && !isKernel) find(node, readsSecret);
      const from = symbol?.declarations?.[0]?.getSourceFile();
      if (!isKernel && from && rel(from.fileName) in kernel) reach.kernelUses.add(`${rel(from.fileName)}:${symbol.getName()}`);
    };
    const readsSecret = `reads a secret's value (${declaration.secretReader}): only kernel code may. Pass the Secret on (a kernel file reads it), or make this file a kernel file in ${DECLARATION_FILE}`;
    const refersToReader = (node) => {
      reach.reveals++;
      if (!isKernel) find(node, readsSecret);
    };

    const checkExport = (node) => {
      if (node.isTypeOnly || node.moduleSpecifier === undefined) return;
      const spec = node.moduleSpecifier.text;
      if (!spec.startsWith('.')) return find(node, `re-exports ${spec}: only a file's own code is exported, a built-in is imported where it is used`);
      checkSpecifier(node.moduleSpecifier, spec);
      if (node.exportClause === undefined && !isKernel && exportsReader(checker.getSymbolAtLocation(node.moduleSpecifier))) find(node, `re-exports everything of ${spec}, the secret reader (${declaration.secretReader}) with it`);
      if (node.exportClause && ts.isNamedExports(node.exportClause)) for (const e of node.exportClause.elements) if (!e.isTypeOnly) noteImported(e, target(checker.getSymbolAtLocation(e.propertyName ?? e.name)));
    };

    /** A global: on the list, its members on theirs, used only where its members stay in reach. */
    /** A global (audit-rules.mjs), against the file's grants: everywhere's, and its own under "files". */
    const grants = {
      globals: new Map(Object.entries({ ...declaration.everywhere.globals, ...grant.globals }).map(([g, members]) => [g, new Set(members)])),
      passedOn: new Set(declaration.everywhere.passedOn),
      process: new Set([...declaration.everywhere.process, ...(grant.process ?? []), ...(declaration.environment.includes(file) ? ['env'] : [])]),
    };
    const checkGlobal = (id) => {
      reach.globals.add(id.text);
      const p = id.parent;
      if (id.text === 'process' && ts.isPropertyAccessExpression(p) && p.expression === id && ts.isIdentifier(p.name)) {
        reach.process.add(p.name.text);
        if (p.name.text === 'env' && !grants.process.has('env')) return find(p, `reads process.env: only the configuration's loader reads the environment (${DECLARATION_FILE} "environment": ${declaration.environment.join(', ')}), and hands on what it read`);
      }
      const judged = judgeGlobal(ts, id, p, grants);
      if (judged !== undefined) find(judged[1], `${judged[0]}${UNLISTED.has(id.text) ? '' : ` in ${DECLARATION_FILE} for this file ("everywhere", or its own under "files"): add it there, for review`}`);
    };

    const checkMemberName = (node, name) => {
      const message = constructorMember(name);
      if (message !== undefined) find(node, message);
    };

    const noteText = (text) => {
      for (const m of text.matchAll(/[a-z][a-z0-9+.-]*:\/\/[^\s"'`<>]*/gi)) reach.hosts.add(m[0]);
      if (HOST_NAME.test(text) || IPV4.test(text)) reach.hosts.add(text);
    };

    const visit = (node) => {
      if (ts.isTypeNode(node) && !ts.isExpressionWithTypeArguments(node)) return;
      switch (node.kind) {
        case ts.SyntaxKind.InterfaceDeclaration:
        case ts.SyntaxKind.TypeAliasDeclaration:
          return;
        case ts.SyntaxKind.ImportDeclaration:
          return checkImport(node);
        case ts.SyntaxKind.ExportDeclaration:
          return checkExport(node);
        case ts.SyntaxKind.ImportEqualsDeclaration:
          return node.isTypeOnly ? undefined : find(node, 'import = require(): import by name, with an import declaration');
        case ts.SyntaxKind.HeritageClause:
          if (node.token === ts.SyntaxKind.ImplementsKeyword) return;
          break;
        case ts.SyntaxKind.CallExpression:
          if (chainsProcess(ts, node, node.parent) && !inSrc(checker.getSymbolAtLocation(node.expression.expression))) find(node, `process.${node.expression.name.text}(...) used for its result, which is process itself`);
          if (node.expression.kind === ts.SyntaxKind.ImportKeyword) {
            const arg = node.arguments[0];
            find(node, `a dynamic import() of ${arg && ts.isStringLiteralLike(arg) ? arg.text : 'a computed name'}: every module is imported statically, so that the build and this audit see it`);
          }
          break;
        case ts.SyntaxKind.PropertyAccessExpression:
          if (ts.isIdentifier(node.name)) checkMemberName(node.name, node.name.text);
          break;
        case ts.SyntaxKind.ElementAccessExpression:
          if (ts.isStringLiteralLike(node.argumentExpression)) checkMemberName(node.argumentExpression, node.argumentExpression.text);
          break;
        case ts.SyntaxKind.BindingElement:
          if (node.propertyName !== undefined && (ts.isIdentifier(node.propertyName) || ts.isStringLiteralLike(node.propertyName))) checkMemberName(node.propertyName, node.propertyName.text);
          break;
        case ts.SyntaxKind.StringLiteral:
        case ts.SyntaxKind.NoSubstitutionTemplateLiteral:
          noteText(node.text);
          break;
        case ts.SyntaxKind.TemplateExpression:
          noteText(node.head.text + node.templateSpans.map((s) => `\${...}${s.literal.text}`).join(''));
          break;
        case ts.SyntaxKind.Identifier:
          if (isReference(ts, node)) {
            const symbol = ts.isShorthandPropertyAssignment(node.parent) ? checker.getShorthandAssignmentValueSymbol(node.parent) : checker.getSymbolAtLocation(node);
            if (!inSrc(symbol)) checkGlobal(node);
            else if (reader !== undefined && target(symbol) === reader) refersToReader(node);
          }
          return;
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  const sorted = Object.fromEntries(
    Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1)).map(([file, r]) => [
      file,
      { lines: r.lines, modules: Object.fromEntries(Object.entries(r.modules).map(([m, s]) => [m, [...s].sort()])), globals: [...r.globals].sort(), process: [...r.process].sort(), hosts: [...r.hosts].sort(), reveals: r.reveals, kernelUses: [...r.kernelUses].sort(), environment: r.environment },
    ]),
  );
  for (const file of Object.keys(kernel)) if (!(file in sorted)) findings.push({ file: DECLARATION_FILE, line: 1, message: `the kernel names ${file}, which is not in src/: remove it from "kernel"` });
  return { findings: findings.sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line), files: sorted };
}

// A host name the report lists: dotted labels ending in a top-level domain the code might name.
const HOST_NAME = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|net|org|io|dev|ai|app|cloud|internal|local|localhost|example|invalid|test|co|us|eu|uk|de)\.?$/;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;

function addTo(map, key, value) {
  (map[key] ??= new Set()).add(value);
}

/** Whether an identifier refers to a declaration (a value's name in code), rather than being one, a member's name or a label. */
function isReference(ts, id) {
  const p = id.parent;
  if (ts.isShorthandPropertyAssignment(p)) return p.name === id;
  if (p.name === id) return false; // a declaration's, a property's, a member's or an accessed member's own name
  if (ts.isBindingElement(p) && p.propertyName === id) return false;
  if (ts.isQualifiedName(p) || ts.isLabeledStatement(p) || ts.isBreakOrContinueStatement(p) || ts.isMetaProperty(p)) return false;
  if (ts.isImportSpecifier(p) || ts.isExportSpecifier(p) || ts.isImportClause(p) || ts.isNamespaceImport(p)) return false;
  return true;
}

/** The digest a run is kept under: src/, the declaration, this script and its rules, the compiler's version. */
function auditKey(root, tsVersion) {
  const hash = createHash('sha256').update(tsVersion);
  for (const file of [DECLARATION_FILE, 'scripts/audit-source.mjs', 'scripts/audit-rules.mjs', ...sourceFiles(root)]) hash.update(`${file}\0`).update(readFileSync(path.join(root, file))).update('\0');
  return hash.digest('hex');
}

/**
 * The audit of src/ under `root`: the kept result when nothing it depends on changed, else a run
 * in full (kept), on `program` when the caller has one of src/ (check-exports.mjs's, which npm
 * test builds anyway), else on sourceProgram's. Returns { findings, files, declaration, cached }.
 */
export function auditSources(root, program = undefined) {
  const declaration = readDeclaration(root);
  const require = createRequire(import.meta.url);
  // The compiler's version from its package.json: a build that reuses the last run loads no compiler.
  const key = auditKey(root, JSON.parse(readFileSync(require.resolve('typescript/package.json'), 'utf8')).version);
  const cacheFile = path.join(root, 'node_modules', '.cache', 'audit-source', 'passed.json');
  let kept = [];
  try {
    const passed = JSON.parse(readFileSync(cacheFile, 'utf8')).passed;
    if (Array.isArray(passed)) kept = passed;
    const hit = kept.find((k) => k.key === key);
    if (hit !== undefined) return { findings: hit.findings, files: hit.files, declaration, cached: true };
  } catch {
    // None kept, or unreadable: the audit runs.
  }
  const ts = require('typescript');
  const result = auditProgram(ts, program ?? sourceProgram(ts, root), root, declaration);
  // The last few runs, failing ones too (the same inputs give the same findings: `npm run
  // audit:source` after a failed build reprints them at once). A copy of the checkout, as the
  // tests build one, shares the cache. Written aside and renamed, as builds may overlap.
  mkdirSync(path.dirname(cacheFile), { recursive: true });
  const temporary = `${cacheFile}.${process.pid}`;
  writeFileSync(temporary, JSON.stringify({ passed: [{ key, findings: result.findings, files: result.files }, ...kept.filter((k) => k.key !== key).slice(0, KEPT_RUNS - 1)] }));
  renameSync(temporary, cacheFile);
  return { ...result, declaration, cached: false };
}

/**
 * The module graph esbuild bundled (its metafile), held against the declaration: every input a
 * file of src/, every import of one a static import of a src/ file or of a built-in the importing
 * file may reach. The belt to the source audit's braces: esbuild's own reading of what each file
 * imports (type-only imports erased), with no line to name.
 */
export function auditGraph(metafile, declaration) {
  const findings = [];
  const capability = new Set(declaration.capabilityModules.map((m) => `node:${m}`));
  for (const [file, input] of Object.entries(metafile.inputs)) {
    const find = (message) => findings.push({ file, line: 0, message: `${message} (the bundle's module graph)` });
    if (!/^src\/(?:[\w.-]+\/)*[\w.-]+\.ts$/.test(file)) find('bundled, from outside src/');
    const grant = declaration.files?.[file]?.modules ?? {};
    for (const imported of input.imports) {
      if (imported.kind !== 'import-statement') find(`imports ${imported.path} by ${imported.kind}: only static imports`);
      else if (!imported.external) {
        if (!imported.path.startsWith('src/')) find(`imports ${imported.path}, outside src/`);
      } else if (capability.has(imported.path) ? !(file in declaration.kernel && imported.path in grant) : !(imported.path in grant || imported.path in declaration.everywhere.modules)) {
        find(`imports ${imported.path}, which ${DECLARATION_FILE} does not grant it`);
      }
    }
  }
  return findings;
}

/** The findings as the build prints them: file:line: message, then what to do. */
export function formatFindings(findings) {
  return [`audit-source: ${findings.length} finding(s) in src/ (${HOW}):`, ...findings.map((f) => `  ${f.file}${f.line > 0 ? `:${f.line}` : ''}: ${f.message}`)].join('\n');
}

/**
 * The report a reviewer reads beside the kernel: the kernel's files with their lines and all they
 * reach (built-ins and members, globals, process members, hosts, reads of a secret's value, what
 * the rest of src/ uses of them), then what the rest reaches, then the findings.
 */
export function formatReport({ findings, files, declaration }) {
  const kernelFiles = Object.keys(declaration.kernel).filter((f) => f in files);
  const rest = Object.keys(files).filter((f) => !(f in declaration.kernel));
  const lines = (list) => list.reduce((n, f) => n + files[f].lines, 0);
  const modules = (r) => Object.entries(r.modules).map(([m, members]) => `${m} ${members.join(', ')}`);
  const out = [`audit-source: src/, ${Object.keys(files).length} files, ${lines(Object.keys(files))} lines; the kernel ${kernelFiles.length} files, ${lines(kernelFiles)} lines (${DECLARATION_FILE})`, '', 'the kernel, read line by line:'];
  const usedOutside = new Map();
  for (const f of rest) for (const use of files[f].kernelUses) usedOutside.set(use, [...(usedOutside.get(use) ?? []), f]);
  for (const f of kernelFiles) {
    const r = files[f];
    out.push(`  ${f} (${r.lines} lines): ${declaration.kernel[f]}`);
    for (const m of modules(r)) out.push(`      built-in  ${m}`);
    if (r.process.length > 0) out.push(`      process   ${r.process.join(', ')}`);
    const globals = r.globals.filter((g) => g !== 'undefined');
    if (globals.length > 0) out.push(`      globals   ${globals.join(', ')}`);
    for (const h of r.hosts) out.push(`      host      ${h}`);
    if (r.reveals > 0) out.push(`      reads a secret's value: ${r.reveals} place(s)`);
    if (r.environment) out.push('      holds the environment (NodeJS.ProcessEnv)');
    const api = [...usedOutside.keys()].filter((u) => u.startsWith(`${f}:`)).map((u) => u.slice(f.length + 1));
    if (api.length > 0) out.push(`      used outside the kernel: ${api.join(', ')}`);
  }
  out.push('', `the rest (${rest.length} files, ${lines(rest)} lines): no capability module, no process.env outside ${declaration.environment.join(', ')}, no secret's value, proved by this audit; what it reaches:`);
  const byReach = new Map();
  for (const f of rest) {
    const r = files[f];
    for (const m of Object.entries(r.modules).flatMap(([m, members]) => members.map((x) => `built-in  ${m} ${x}`))) byReach.set(m, [...(byReach.get(m) ?? []), f]);
    for (const p of r.process) byReach.set(`process   ${p}`, [...(byReach.get(`process   ${p}`) ?? []), f]);
    for (const h of r.hosts) byReach.set(`host      ${h}`, [...(byReach.get(`host      ${h}`) ?? []), f]);
    if (r.environment) byReach.set('holds the environment (NodeJS.ProcessEnv, from main.ts: any variable by name)', [...(byReach.get('holds the environment (NodeJS.ProcessEnv, from main.ts: any variable by name)') ?? []), f]);
  }
  for (const [what, where] of [...byReach].sort()) out.push(`  ${what}: ${where.join(', ')}`);
  const globals = [...new Set(rest.flatMap((f) => files[f].globals))].filter((g) => g !== 'undefined').sort();
  out.push(`  globals   ${globals.join(', ')}`);
  out.push('', findings.length === 0 ? 'findings: none' : formatFindings(findings));
  return out.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const result = auditSources(path.join(here, '..'));
  console.log(formatReport(result));
  process.exitCode = result.findings.length === 0 ? 0 : 1;
}

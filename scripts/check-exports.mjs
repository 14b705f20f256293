#!/usr/bin/env node
// Fails on exports of src/ that nothing imports: dead code, or an `export` that says a name is
// shared when it is not. Uses the TypeScript compiler (a dev tool the project already has): every
// import in src/, test/ and scripts/ is resolved to the declaration it names, and each export of
// a src/ file must be one of them. A type also counts when another export's declaration names it
// (the options interface of an exported function is part of that function's interface). Values
// that only their own file uses are reported: drop the `export`, or the code.
//
//   node scripts/check-exports.mjs        exit 0: every export is used; 1: the list of those that are not
//   node scripts/check-exports.mjs --typecheck   the type errors first, as tsc --noEmit (npm test runs this)
//   --audit-source: the source audit as well (scripts/audit-source.mjs), on this same program: npm
//   test runs it here, beside the tests, and has build.mjs leave it out (AUDIT_SOURCE_BESIDE=1),
//   so that the audit adds no program of its own to npm test. Its findings fail this run.
//
// The type check is incremental, as `tsc --incremental --noEmit` is: each file's diagnostics are
// kept in node_modules/.cache/check-exports/ and only the files that changed, and those whose
// view of a changed file's types changed, are checked again (TypeScript's own builder decides).
// A save that touches one file costs seconds, not the whole program; the first run, or one
// after the cache is deleted, checks everything.
//
// Parsing and binding every file (some 520 with Node's and the language's declarations) is most
// of a run's cost, and TypeScript redoes it in every process. So a run that passes also records
// what it read (scripts/recorded-reads.mjs: each file's digest, each probe of the file system,
// the directory listing of tsconfig's `include`), with TypeScript's version and this script's
// text; the next run asks the same questions first and, when every answer is the same, prints
// the passing result again without building the program. A failure is never recorded.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { auditSources, formatFindings } from './audit-source.mjs';
import { recordReads, sameReads } from './recorded-reads.mjs';

// require(), not import: Node's ESM loader scans the 9 MB compiler for its named exports
// first, 0.7 s of CPU.
const ts = createRequire(import.meta.url)('typescript');
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const typecheck = process.argv.includes('--typecheck');
const auditSource = process.argv.includes('--audit-source');
const cacheDir = path.join(root, 'node_modules', '.cache', 'check-exports');
const RECORD_FILE = path.join(cacheDir, 'passed.json');
// What the result depends on besides the files: the compiler and the checks themselves.
const checkerKey = createHash('sha256')
  .update(JSON.stringify([ts.version, ...['check-exports.mjs', 'recorded-reads.mjs'].map((f) => readFileSync(path.join(root, 'scripts', f), 'utf8'))]))
  .digest('hex');

const lastPass = readRecord();
if (lastPass !== null && lastPass.checkerKey === checkerKey && (lastPass.typechecked || !typecheck) && sameReads(ts.sys, lastPass.reads)) {
  for (const line of lastPass.lines) if (typecheck || !line.startsWith('typecheck:')) console.log(line);
  console.log(`check-exports: the ${lastPass.reads.length} reads of the last passing run (${lastPass.at}) answer the same: its result stands`);
  // The program's files are unchanged; the audit keeps its own result by its own inputs (kernel.json too).
  process.exit(auditSource && !sourceAuditPasses(undefined) ? 1 : 0);
}

const recording = recordReads(ts.sys, (file) => path.resolve(root, file).startsWith(cacheDir + path.sep));
const configFile = ts.readConfigFile(path.join(root, 'tsconfig.json'), recording.system.readFile);
const parsed = ts.parseJsonConfigFileContent(configFile.config, recording.system, root);
const options = { ...parsed.options, incremental: true, tsBuildInfoFile: path.join(cacheDir, 'tsconfig.tsbuildinfo') };
const compilerHost = ts.createIncrementalCompilerHost(options, recording.system);
// As tsc parses: JSDoc only where it can hold a type error (JavaScript files, @see and @link),
// not every comment of every file; the diagnostics are tsc's.
compilerHost.jsDocParsingMode = ts.JSDocParsingMode.ParseForTypeErrors;
const builder = ts.createIncrementalProgram({
  rootNames: parsed.fileNames,
  options,
  host: compilerHost,
  configFileParsingDiagnostics: ts.getConfigFileParsingDiagnostics(parsed),
});
const program = builder.getProgram();
const lines = [];
// --typecheck: the type errors of this same program first (what `tsc --noEmit` reports), so that
// `npm test` builds one TypeScript program, not two.
if (typecheck) {
  const diagnostics = [
    ...builder.getConfigFileParsingDiagnostics(),
    ...builder.getOptionsDiagnostics(),
    ...builder.getGlobalDiagnostics(),
    ...builder.getSyntacticDiagnostics(),
    ...builder.getSemanticDiagnostics(),
  ];
  builder.emit(); // noEmit: writes only the build info, each file's diagnostics for the next run
  if (diagnostics.length > 0) {
    const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => root, getNewLine: () => '\n' };
    console.error(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
    console.error(`check-exports --typecheck: ${diagnostics.length} type error(s)`);
    process.exit(1);
  }
  lines.push(`typecheck: no type errors (${program.getSourceFiles().length} files)`);
  console.log(lines.at(-1));
}
const checker = program.getTypeChecker();
const srcDir = path.join(root, 'src') + path.sep;
const ours = program.getSourceFiles().filter((f) => !f.isDeclarationFile && !f.fileName.includes(`${path.sep}node_modules${path.sep}`));

/** The declaration a symbol finally stands for, through import aliases. */
const target = (symbol) => (symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol);

// Every symbol some file imports (named, default or `import type`), resolved to its declaration;
// and, apart, those that src/ itself imports (production use).
const imported = new Set();
const importedBySrc = new Set();
for (const file of ours) {
  const fromSrc = file.fileName.startsWith(srcDir);
  const add = (symbol) => {
    imported.add(symbol);
    if (fromSrc) importedBySrc.add(symbol);
  };
  for (const statement of file.statements) {
    if (!ts.isImportDeclaration(statement) && !ts.isExportDeclaration(statement)) continue;
    const clause = ts.isImportDeclaration(statement) ? statement.importClause : statement;
    if (!clause) continue;
    const names = [];
    if (ts.isImportDeclaration(statement)) {
      if (clause.name) names.push(clause.name);
      const bindings = clause.namedBindings;
      if (bindings && ts.isNamedImports(bindings)) for (const el of bindings.elements) names.push(el.name);
      if (bindings && ts.isNamespaceImport(bindings)) {
        // `import * as x`: every export of that module counts as used.
        const moduleSymbol = checker.getSymbolAtLocation(statement.moduleSpecifier);
        if (moduleSymbol) for (const e of checker.getExportsOfModule(moduleSymbol)) add(target(e));
      }
    } else if (statement.exportClause && ts.isNamedExports(statement.exportClause)) {
      for (const el of statement.exportClause.elements) names.push(el.name);
    }
    for (const name of names) {
      const symbol = checker.getSymbolAtLocation(name);
      if (symbol) add(target(symbol));
    }
  }
}

/**
 * The names under which a file's exports can be written in that file: each exported name and the
 * names along its alias chain (`export { a as b }`, an import re-exported). Only identifiers
 * spelled so can refer to an export, so only those are resolved: resolving every identifier
 * would type-check every expression of src/ a second time.
 */
function exportNames(moduleSymbol) {
  const names = new Set();
  for (let symbol of checker.getExportsOfModule(moduleSymbol)) {
    names.add(symbol.getName());
    while (symbol.flags & ts.SymbolFlags.Alias) {
      symbol = checker.getImmediateAliasedSymbol(symbol);
      if (!symbol) break;
      names.add(symbol.getName());
    }
  }
  return names;
}

/** Symbols among `names` a file refers to anywhere but in their own declaration's name. */
function usedInFile(file, names) {
  const used = new Set();
  const visit = (node) => {
    if (ts.isIdentifier(node) && names.has(node.text)) {
      const s = checker.getSymbolAtLocation(node);
      const own = node.parent && node.parent.name === node && s?.declarations?.includes(node.parent);
      if (s && !own) used.add(target(s));
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return used;
}

/** Symbols among `names` named inside the declarations of a file's exports, other than the export itself. */
function namedByExports(moduleSymbol, names) {
  const named = new Set();
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    for (const decl of exported.declarations ?? []) {
      const visit = (node) => {
        if (ts.isIdentifier(node) && names.has(node.text)) {
          const s = checker.getSymbolAtLocation(node);
          if (s && target(s) !== target(exported)) named.add(target(s));
        }
        ts.forEachChild(node, visit);
      };
      visit(decl);
    }
  }
  return named;
}

const TYPE_FLAGS = ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias | ts.SymbolFlags.Class;
const unused = [];
for (const file of ours.filter((f) => f.fileName.startsWith(srcDir))) {
  const moduleSymbol = checker.getSymbolAtLocation(file);
  if (!moduleSymbol) continue;
  const names = exportNames(moduleSymbol);
  const named = namedByExports(moduleSymbol, names);
  const local = usedInFile(file, names);
  for (const symbol of checker.getExportsOfModule(moduleSymbol)) {
    const t = target(symbol);
    // Production code uses it from another file; or its own file uses it and it is exported
    // so that tests can reach it; or it is a type in the interface of another export.
    if (importedBySrc.has(t) || (local.has(t) && imported.has(t))) continue;
    if (symbol.flags & TYPE_FLAGS && named.has(t)) continue;
    const decl = symbol.declarations?.[0];
    const line = decl ? file.getLineAndCharacterOfPosition(decl.getStart()).line + 1 : 0;
    unused.push(`${path.relative(root, file.fileName)}:${line}: ${symbol.getName()}`);
  }
}

const audited = !auditSource || sourceAuditPasses(program);
if (unused.length > 0) {
  console.error(`check-exports: ${unused.length} export(s) nothing imports (delete them, or drop the export):\n${unused.map((u) => `  ${u}`).join('\n')}`);
  process.exit(1);
}
if (!audited) process.exit(1);
lines.push(`check-exports: every export of src/ is used by production code (${ours.length} files checked)`);
console.log(lines.at(-1));
writeRecord(recording.reads());

/** The source audit (on `program`, or its own when undefined), its verdict printed; whether it found nothing. */
function sourceAuditPasses(on) {
  const audit = auditSources(root, on);
  if (audit.findings.length > 0) {
    console.error(formatFindings(audit.findings));
    return false;
  }
  console.log(`audit-source: src/ ${Object.keys(audit.files).length} files, no finding${audit.cached ? ' (src/ unchanged since the last run)' : ''}`);
  return true;
}

/** The record of the last passing run, or null (none, or unreadable: the check runs). */
function readRecord() {
  try {
    const record = JSON.parse(readFileSync(RECORD_FILE, 'utf8'));
    return Array.isArray(record.reads) && Array.isArray(record.lines) ? record : null;
  } catch {
    return null;
  }
}

/** Keeps this pass's reads for the next run; written aside and renamed, as runs may overlap. */
function writeRecord(reads) {
  if (reads === null) return;
  mkdirSync(cacheDir, { recursive: true });
  const temporary = `${RECORD_FILE}.${process.pid}`;
  writeFileSync(temporary, JSON.stringify({ checkerKey, typechecked: typecheck, at: new Date().toISOString(), lines, reads }));
  renameSync(temporary, RECORD_FILE);
}

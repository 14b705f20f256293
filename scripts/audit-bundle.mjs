#!/usr/bin/env node
// Audits the shipped bundle: proves that dist/proxy.js (or the file named on the command line)
// loads nothing but node: built-ins and evaluates no code it was not built with, and lists the
// source files it was bundled from. A reviewer runs it before reading the file.
//
//   node scripts/audit-bundle.mjs [FILE]       exit 0: clean; 1: findings; 2: cannot read FILE
//
// The file is tokenised (comments, strings, template literals and regular expressions are told
// apart from code), so text inside a string never counts as a call and a call is never hidden
// from the scan by looking like text. Findings:
// - require(...) or import(...) whose argument is not one string literal naming a node: built-in
//   (no escapes, no concatenation, no variables), and built-ins that run code or load modules
//   (node:vm, node:child_process, node:worker_threads, node:module, ...), which the proxy never needs;
// - any other use of `require` (aliased, `require.resolve`, `module.require`), `createRequire`,
//   static import/export declarations (the bundle is CommonJS);
// - eval in any form, `new Function(` or `Function(`, `process.binding`, `process._linkedBinding`,
//   `process.dlopen`, and the same names reached through a computed member (`x["eval"]`);
// - names the proxy never uses that reach the module system, the global object or the Function
//   constructor, wherever they stand (`module`, `arguments`, `globalThis`, `Reflect`, `Function`,
//   `WebAssembly`, `getBuiltinModule`, `_load`, `_compile`, `mainModule`, crypto engines,
//   `_debugProcess`, `constructor` other than a class's own), `process` other than to read a
//   member on a short list (argv, env, exit, stdout, ...), reflection that finds constructors
//   without naming them (getOwnPropertyDescriptors, getPrototypeOf, __proto__, ...), and a
//   string spelling any of these names once its escapes are decoded and the literals + adds to
//   it joined (a key, a destructured name, a descriptor's name: "ev" + "al"); kill and SIGUSR1
//   (which opens the inspector); a string naming a process's memory file (/proc/self/mem);
// - a computed member or computed property key built from strings (`x["ev" + "al"]`,
//   `{ ["ev" + "al"]: e }`, a template, an escape, a regular expression's source);
// - code before `"use strict";` (the file would run outside strict mode);
// - identifiers spelled with \u escapes (`\u0065val` is eval);
// - a place the scan cannot read as node would, each a finding rather than a guess (node then
//   sees code the scan took for text, or the other way round): a character outside ASCII in
//   code (esbuild writes code in ASCII; JavaScript reads U+00A0, U+3000 and others as spaces),
//   an HTML-like comment (`<!--`, `-->`, which node reads as a line comment in a script), a `/`
//   right after `}` (a division after an object, a regular expression after a block), a `/` right
//   after `of`, `await` or `yield` (a keyword or a variable, as the code around says), a `/` or a
//   `++`/`--` at the start of a line (where a semicolon may be inserted), a name right after a
//   number;
// - a module comment (`// src/xxx.ts`, which esbuild writes before each module) naming a file
//   outside src/, or no module comment at all; a tokeniser that loses its way (fail closed);
// - no build header (build.mjs writes one before the code: the version, the source commit and
//   the SHA-256 of the sources and the lockfile, scripts/build-bundle.mjs); the report repeats
//   what it says, so that the reviewer knows which commit to rebuild and compare.
// What no scan of the text can see: a name computed at run time from variables (`x[k]`, with k
// assembled elsewhere). The audit shows what the bundle esbuild built from src/ uses; that the
// shipped file IS that bundle is the byte-for-byte rebuild's proof (SECURITY.md, "How to review").
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const BUILTINS = new Set(builtinModules.filter((m) => !m.startsWith('_')));
// Built-ins that can run code, start processes or load modules: nothing the proxy needs.
// node:process too: it is `process` under another name, out of reach of the rules for `process`.
const FORBIDDEN_BUILTINS = new Set(['vm', 'child_process', 'worker_threads', 'cluster', 'module', 'repl', 'inspector', 'inspector/promises', 'wasi', 'trace_events', 'v8', 'process']);
const PROCESS_LOADERS = new Set(['binding', '_linkedBinding', 'dlopen']);
const COMPUTED_NAMES = new Set(['eval', 'require', 'binding', '_linkedBinding', 'dlopen', 'createRequire', 'Function', 'constructor']);
const REGEX_AFTER_KEYWORD = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'extends', 'yield', 'await']);
// Of those, the ones code may also use as a variable (`of / 2`): a `/` after them is not read, it is a finding.
const KEYWORD_OR_VARIABLE = new Set(['of', 'await', 'yield']);
// A `(` after these opens a statement's head: after its `)` a statement begins, so a `/` there
// starts a regular expression (`if (x) /re/.test(y)`), where after any other `)` it divides.
const STATEMENT_HEADS = new Set(['if', 'while', 'for', 'with']);

// The runs the scanner takes in one step, each a sticky expression matched where a token starts
// (one regular expression per run, not one per character: the bundle is half a megabyte, and
// npm test audits it and some thirty edited copies). A backslash takes the character after it.
// Code is read as ASCII: a character outside it is a finding (see above), never part of a space
// or a name.
const SPACE_RUN = /[ \t\n\v\f\r]+/y;
const IDENT_RUN = /[\w$]*(?:\\[\s\S]?[\w$]*)*/y;
// A string ends at its quote; a raw line end in it (CR too, which JavaScript forbids there as it
// does LF) leaves it unterminated.
const QUOTED = { '"': /"[^"\\\n\r]*(?:\\[\s\S][^"\\\n\r]*)*"/y, "'": /'[^'\\\n\r]*(?:\\[\s\S][^'\\\n\r]*)*'/y };
// JavaScript's line terminators: each ends a // comment, and none may stand raw in a regular expression.
const LINE_END = /[\n\r\u2028\u2029]/g;
const isLineEnd = (c) => c === '\n' || c === '\r' || c === '\u2028' || c === '\u2029';
const TEMPLATE_RUN = /[^`\\$]*(?:(?:\\[\s\S]|\$(?!\{))[^`\\$]*)*/y;
// A numeric literal as JavaScript reads one (1, 1.5, .5, 1., 1e+5, 1_000, 0x1F, 0o7, 0b1, 10n):
// what follows it is read on its own (`1..e+x` is the number 1., then `.e + x`).
const NUMBER = /0[xX][\da-fA-F](?:_?[\da-fA-F])*n?|0[oO][0-7](?:_?[0-7])*n?|0[bB][01](?:_?[01])*n?|(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d(?:_?\d)*)?n?/y;
// Names the proxy's code never uses that reach code loading or evaluation, each a finding
// wherever it stands, as a member too (global.Function, module.constructor._load,
// process?.binding, require("node:process").dlopen): UNUSED_GLOBALS (the module system, the
// global object, the Function constructor) and LOADER_NAMES. `constructor`: a finding as a member
// (x.constructor.constructor is Function); a class's own `constructor(` is not one.
const UNUSED_GLOBALS = new Set(['module', 'arguments', 'globalThis', 'Reflect', 'Function', 'WebAssembly']);
// Crypto engines and the inspector load native code or evaluate it too (crypto.setEngine,
// tls's privateKeyEngine, process._debugProcess; SIGUSR1 opens the inspector, and kill sends it:
// process.on() returns process, so `process.on(...).kill(pid, 10)` needs no `process.kill`).
const LOADER_NAMES = new Set(['getBuiltinModule', '_load', '_compile', 'mainModule', 'setEngine', 'privateKeyEngine', 'clientCertEngine', 'setClientCertEngine', 'setEngineKey', '_debugProcess', 'kill', 'SIGUSR1', ...PROCESS_LOADERS]);
// Reflection the proxy never uses, which finds constructors without naming them (the Function
// constructor among a prototype's property descriptors): a finding wherever it stands.
const REFLECTION_NAMES = new Set(['getOwnPropertyDescriptors', 'getOwnPropertyDescriptor', 'getOwnPropertyNames', 'getPrototypeOf', 'setPrototypeOf', '__proto__']);
// What code may read of `process`: anything else (process.binding, process?.x, a destructured
// or passed process) is a finding.
const PROCESS_MEMBERS = new Set(['argv', 'env', 'exit', 'exitCode', 'memoryUsage', 'cpuUsage', 'resourceUsage', 'hrtime', 'on', 'once', 'off', 'removeListener', 'stderr', 'stdout', 'uptime', 'pid', 'platform', 'version', 'versions', 'cwd', 'nextTick', 'emitWarning']);
// The identifiers the scan looks at (besides those spelled with an escape).
const CHECKED_NAMES = new Set(['require', 'import', 'export', 'eval', 'createRequire', 'process', 'constructor', ...UNUSED_GLOBALS, ...LOADER_NAMES, ...REFLECTION_NAMES]);
// A string (or template text) spelling one of these is a finding wherever it stands: a key
// (x["eval"], const {"eval": e} = global), a descriptor's name, a signal. "arguments" is left
// out: the protocols name a tool call's "arguments" field.
const SPELLED_NAMES = new Set([...CHECKED_NAMES].filter((name) => name !== 'arguments')); // COMPUTED_NAMES are all checked names
// A process's memory file: writing it with node:fs patches the process's native code.
const PROCESS_MEMORY = /^\/proc\/[^/]*\/(?:task\/[^/]*\/)?mem$/;

/** Where a sticky expression's match at `at` ends (at itself when it matches nothing). */
function runEnd(pattern, text, at) {
  pattern.lastIndex = at;
  return pattern.test(text) ? pattern.lastIndex : at;
}

const isDigit = (code) => code >= 48 && code <= 57;
const isPunct = (token, value) => token?.type === 'punct' && token.value === value;
/** Whether tokens[k] is a member name: after `.` (not the last dot of `...`) or `#`. */
const isMemberName = (tokens, k) => isPunct(tokens[k - 1], '#') || (isPunct(tokens[k - 1], '.') && !(isPunct(tokens[k - 2], '.') && tokens[k - 2].start === tokens[k - 1].start - 1));
/** [A-Za-z_$\\], what an identifier starts with (a backslash: an escape). */
const isIdentStart = (code) => (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95 || code === 36 || code === 92;

/**
 * Splits JavaScript into tokens ({ type, value, start, head }: ident, string, template, regex,
 * number, punct; `head`: a template piece ending in ${, a ) ending a statement's head; every
 * token has the four fields, so that reading them stays fast), comments, and `unclear`: the places it cannot read as node would ({ start,
 * what }; see the findings above), each read one way and listed. Throws on anything it cannot
 * follow.
 */
export function tokenize(text) {
  const tokens = [];
  const comments = [];
  const unclear = [];
  const substitutions = []; // brace depth at each open `${` of a template literal
  const heads = []; // for each open (, whether it opens a statement's head (STATEMENT_HEADS)
  let depth = 0;
  let i = 0;
  if (text.startsWith('#!')) {
    // A hashbang line ends, as a // comment does, at any line terminator.
    LINE_END.lastIndex = 0;
    i = LINE_END.exec(text)?.index ?? text.length;
  }
  /** Whether a line ended since the last token (automatic semicolon insertion may end a statement there). */
  let lineBreak = false;
  const push = (token) => {
    tokens.push(token);
    lineBreak = false;
  };
  const fail = (what, at) => {
    throw new Error(`${what} at ${position(text, at)}`);
  };
  const last = () => tokens[tokens.length - 1];
  /** The token n places before the last (0: the last). */
  const back = (n) => tokens[tokens.length - 1 - n];
  /** Whether the token n places before the last is `name` itself, not a member `.name` or `#name`. */
  const isName = (n, name) => back(n)?.type === 'ident' && back(n).value === name && !isMemberName(tokens, tokens.length - 1 - n);

  // Reads template text from `from` (just after ` or a closing }) to its end or next `${`.
  const readTemplate = (from) => {
    const j = runEnd(TEMPLATE_RUN, text, from);
    if (text[j] === '`') {
      push({ type: 'template', value: text.slice(from, j), start: from, head: false });
      return j + 1;
    }
    // The run stops only at ` or ${ (a lone $ is template text), or at the end of the text or a backslash at it.
    if (text[j] !== '$') fail('unterminated template literal', from);
    // `head`: the text ends in ${, after which an expression begins (a / there starts a regular expression).
    push({ type: 'template', value: text.slice(from, j), start: from, head: true });
    substitutions.push(depth);
    depth++;
    return j + 2;
  };

  while (i < text.length) {
    const code = text.charCodeAt(i);
    const c = text[i];
    const start = i;
    if (code === 32 || (code >= 9 && code <= 13)) {
      i = runEnd(SPACE_RUN, text, i);
      for (let p = start; p < i && !lineBreak; p++) lineBreak = text.charCodeAt(p) === 10 || text.charCodeAt(p) === 13;
    } else if (c === '/' && text[i + 1] === '/') {
      LINE_END.lastIndex = i;
      const end = LINE_END.exec(text);
      i = end === null ? text.length : end.index;
      comments.push({ value: text.slice(start, i), start });
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      if (end < 0) fail('unterminated comment', i);
      i = end + 2;
      LINE_END.lastIndex = start;
      if ((LINE_END.exec(text)?.index ?? Infinity) < i) lineBreak = true; // a comment over lines ends a line
      comments.push({ value: text.slice(start, i), start });
    } else if (c === '"' || c === "'") {
      const j = runEnd(QUOTED[c], text, i);
      if (j === i) fail('unterminated string', i); // a newline or the end of the text before the closing quote
      push({ type: 'string', value: text.slice(i + 1, j - 1), start, head: false });
      i = j;
    } else if (c === '`') {
      i = readTemplate(i + 1);
    } else if (c === '}' && substitutions.length > 0 && depth - 1 === substitutions[substitutions.length - 1]) {
      substitutions.pop();
      depth--;
      i = readTemplate(i + 1);
    } else if (isIdentStart(code)) {
      const j = runEnd(IDENT_RUN, text, i);
      push({ type: 'ident', value: text.slice(i, j), start, head: false });
      i = j;
    } else if (isDigit(code) || (c === '.' && isDigit(text.charCodeAt(i + 1)))) {
      const j = runEnd(NUMBER, text, i);
      // JavaScript refuses a name or a digit right after a number (3in, 0b12): not something to read on.
      if (j < text.length && (isIdentStart(text.charCodeAt(j)) || isDigit(text.charCodeAt(j)))) unclear.push({ start: j, what: 'a name or digit right after a number' });
      push({ type: 'number', value: text.slice(i, j), start, head: false });
      i = j;
    } else if (c === '/') {
      const prev = last();
      const keyword = prev?.type === 'ident' && REGEX_AFTER_KEYWORD.has(prev.value) && isName(0, prev.value);
      if (prev?.type === 'punct' && prev.value === '}') unclear.push({ start, what: 'a / right after }: a division after an object, a regular expression after a block' });
      if (keyword && KEYWORD_OR_VARIABLE.has(prev.value)) unclear.push({ start, what: `a / right after ${prev.value}: a regular expression after the keyword, a division after a variable of that name` });
      if (prev?.type === 'punct' && (prev.value === '++' || prev.value === '--')) unclear.push({ start, what: `a / right after ${prev.value}: a division after a postfix, a regular expression after a prefix` });
      if (prev !== undefined && lineBreak) unclear.push({ start, what: 'a / at the start of a line: a division going on from the line before, or a regular expression after an inserted semicolon' });
      const division =
        prev !== undefined &&
        ((prev.type === 'punct' && ((prev.value === ')' && !prev.head) || prev.value === ']' || prev.value === '}' || prev.value === '++' || prev.value === '--')) ||
          (prev.type === 'ident' && !keyword) ||
          prev.type === 'number' ||
          prev.type === 'string' ||
          (prev.type === 'template' && !prev.head) ||
          prev.type === 'regex');
      if (division) {
        push({ type: 'punct', value: '/', start, head: false });
        i++;
        continue;
      }
      let j = i + 1;
      let inClass = false;
      for (;;) {
        if (j >= text.length || isLineEnd(text[j])) fail('unterminated regular expression', i);
        const r = text[j];
        if (r === '\\') j += 2;
        else {
          if (r === '[') inClass = true;
          else if (r === ']') inClass = false;
          else if (r === '/' && !inClass) break;
          j++;
        }
      }
      j++;
      while (j < text.length && /[a-z]/.test(text[j])) j++;
      push({ type: 'regex', value: text.slice(i, j), start, head: false });
      i = j;
    } else {
      if (code >= 0x80) unclear.push({ start, what: `a character outside ASCII in code (U+${code.toString(16).toUpperCase().padStart(4, '0')})` });
      if ((c === '<' && text.startsWith('!--', i + 1)) || (c === '-' && text.startsWith('->', i + 1))) unclear.push({ start, what: 'an HTML-like comment (<!-- or -->), which node reads as a line comment' });
      if (c === '{') depth++;
      else if (c === '}') depth--;
      if (depth < 0) fail('unbalanced }', i);
      // ++ and -- are one token each, read greedily as JavaScript does (a+++/re/ is a++ + /re/): a
      // / after one divides. At the start of a line, ++ may be a prefix after an inserted semicolon.
      const double = (c === '+' || c === '-') && text[i + 1] === c;
      if (double && lineBreak && tokens.length > 0) unclear.push({ start, what: `${c}${c} at the start of a line: a postfix of the line before, or a prefix after an inserted semicolon` });
      const token = { type: 'punct', value: double ? c + c : c, start, head: false };
      if (c === '(') heads.push(STATEMENT_HEADS.has(last()?.value) ? isName(0, last().value) : isName(0, 'await') && isName(1, 'for'));
      else if (c === ')') {
        if (heads.length === 0) fail('unbalanced )', i);
        if (heads.pop()) token.head = true;
      }
      push(token);
      i += double ? 2 : 1;
    }
  }
  if (substitutions.length > 0) fail('unterminated template literal', text.length);
  return { tokens, comments, unclear };
}

function position(text, offset) {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return `${line}:${offset - before.lastIndexOf('\n')}`;
}

/**
 * What the build header says, from the comments before the first line of code:
 * { version, commit, sourcesSha256, lockfileSha256 }, or null when any of them is missing.
 */
export function readHeader(comments, tokens) {
  const firstCode = tokens[0]?.start ?? Infinity;
  const text = comments.filter((c) => c.start < firstCode).map((c) => c.value).join('\n');
  const version = /^\/\/ credential-proxy (\S+): bundled from src\//m.exec(text)?.[1];
  const commit = /^\/\/ source commit: +(\S+)$/m.exec(text)?.[1];
  const sourcesSha256 = /^\/\/ sources sha256: +([0-9a-f]{64})\b/m.exec(text)?.[1];
  const lockfileSha256 = /^\/\/ lockfile sha256: +([0-9a-f]{64})\b/m.exec(text)?.[1];
  if (!version || !commit || !sourcesSha256 || !lockfileSha256) return null;
  return { version, commit, sourcesSha256, lockfileSha256 };
}

/** Audits bundle text; returns { findings, builtins, sources, header }. */
export function auditBundle(text) {
  const findings = [];
  const builtins = new Set();
  const at = (token) => position(text, token.start);
  let scanned;
  try {
    scanned = tokenize(text);
  } catch (err) {
    return { findings: [`cannot tokenise the bundle: ${err.message}`], builtins: [], sources: [], header: null };
  }
  const { tokens, comments, unclear } = scanned;
  for (const u of unclear) findings.push(`${position(text, u.start)}: ${u.what}`);
  // Code before the directive would run outside strict mode (where a function's caller and
  // arguments, and with them the module's require, are in reach).
  if (!(tokens[0]?.type === 'string' && tokens[0].value === 'use strict' && tokens[1]?.type === 'punct' && tokens[1].value === ';')) findings.push('the code does not begin with "use strict";');
  const header = readHeader(comments, tokens);
  if (header === null) findings.push('no build header (version, source commit, sources and lockfile sha256): the file was not built by build.mjs');
  const t = (k) => tokens[k];
  const is = (k, type, value) => t(k)?.type === type && (value === undefined || t(k).value === value);

  /** A module load: ( "node:builtin" ) right after the require/import token at k. */
  const checkLoad = (k, what) => {
    const arg = t(k + 2);
    if (!is(k + 1, 'punct', '(') || arg?.type !== 'string' || !is(k + 3, 'punct', ')') || arg.value.includes('\\')) {
      findings.push(`${at(t(k))}: ${what} with an argument that is not one plain string literal`);
      return;
    }
    checkSpecifier(arg, what);
  };
  /**
   * The key of the computed member whose [ is at k: one plain string is read as a name (above);
   * a key built from strings ('ev' + 'al', a template holding one, escapes) is a finding. A key
   * made of variables cannot be read by any scan (see SECURITY.md, "How to review").
   */
  const checkComputedKey = (k, orArray) => {
    let end = k + 1;
    let comma = false; // at the key's own level: then `of [a, b]` is an array, not of[a, b]
    for (let d = 1, nested = 0; end < tokens.length; end++) {
      if (is(end, 'punct', '[')) d++;
      else if (is(end, 'punct', ']') && --d === 0) break;
      else if (is(end, 'punct', '(') || is(end, 'punct', '{')) nested++;
      else if (is(end, 'punct', ')') || is(end, 'punct', '}')) nested--;
      else if (is(end, 'punct', ',') && d === 1 && nested === 0) comma = true;
    }
    if (orArray && comma) return;
    const key = tokens.slice(k + 1, end);
    if (key.length === 1 && key[0].type === 'string') {
      if (key[0].value.includes('\\')) findings.push(`${at(key[0])}: computed member spelled with an escape`);
      return;
    }
    const spelled = key.some((x) => x.type === 'string' || x.type === 'regex' || (x.type === 'template' && x.value.includes('\\'))) || (key.length === 1 && key[0].type === 'template');
    if (spelled) findings.push(`${at(tokens[k])}: computed member built from strings or a template`);
  };
  const checkSpecifier = (arg, what) => {
    const name = arg.value;
    if (!name.startsWith('node:') || !BUILTINS.has(name.slice(5))) findings.push(`${at(arg)}: ${what}("${name}") is not a node: built-in`);
    else if (FORBIDDEN_BUILTINS.has(name.slice(5))) findings.push(`${at(arg)}: ${what}("${name}") can run code or load modules`);
    else builtins.add(name);
  };

  for (let k = 0; k < tokens.length; k++) {
    const tok = tokens[k];
    if (tok.type === 'string' || (tok.type === 'template' && !tok.head)) {
      // The text as JavaScript decodes it, joined with the literals + adds to it ('ev' + 'al').
      let spelled = decodeEscapes(tok.value);
      for (let j = k + 1; is(j, 'punct', '+') && (t(j + 1)?.type === 'string' || (t(j + 1)?.type === 'template' && !t(j + 1).head)); j += 2) spelled += decodeEscapes(t(j + 1).value);
      // One finding a string; x["eval"] is named as the computed member it is.
      const member = tok.type === 'string' && COMPUTED_NAMES.has(tok.value) && is(k - 1, 'punct', '[') && is(k + 1, 'punct', ']');
      if (SPELLED_NAMES.has(spelled)) findings.push(member ? `${at(tok)}: computed member ["${tok.value}"]` : `${at(tok)}: a string spelling ${spelled}`);
      if (PROCESS_MEMORY.test(spelled)) findings.push(`${at(tok)}: a string naming a process's memory (${spelled}), which node:fs can rewrite as native code`);
    }
    if (tok.type === 'punct' && tok.value === '[') {
      const bracket = bracketKind(tokens, k);
      if (bracket !== 'array') checkComputedKey(k, bracket === 'member or array');
    }
    if (tok.type !== 'ident') continue;
    const name = tok.value;
    if (!CHECKED_NAMES.has(name) && !name.includes('\\')) continue; // nearly every identifier: nothing below applies
    const member = isMemberName(tokens, k); // x.name or #name, not ...name
    if (name.includes('\\')) findings.push(`${at(tok)}: identifier spelled with an escape: ${name}`);
    else if (name === 'require') {
      if (member) findings.push(`${at(tok)}: require used as a member (${t(k - 2)?.value ?? ''}.require)`);
      else if (is(k + 1, 'punct', '(')) checkLoad(k, 'require');
      else findings.push(`${at(tok)}: require used other than as a direct call`);
    } else if (name === 'import' && !member) {
      if (is(k + 1, 'punct', '(')) checkLoad(k, 'import');
      else if (is(k + 1, 'punct', '.') && is(k + 2, 'ident', 'meta')) continue;
      else findings.push(`${at(tok)}: static import declaration in a CommonJS bundle`);
    } else if (name === 'export' && !member) {
      findings.push(`${at(tok)}: export declaration in a CommonJS bundle`);
    } else if (name === 'eval') {
      findings.push(`${at(tok)}: eval`);
    } else if (name === 'Function' && !member && (is(k - 1, 'ident', 'new') || is(k + 1, 'punct', '('))) {
      findings.push(`${at(tok)}: ${is(k - 1, 'ident', 'new') ? 'new ' : ''}Function(`);
    } else if (name === 'createRequire') {
      findings.push(`${at(tok)}: createRequire`);
    } else if (UNUSED_GLOBALS.has(name)) {
      findings.push(`${at(tok)}: ${name}, which the proxy's code never uses (it reaches the module system, the global object or the Function constructor)`);
    } else if (PROCESS_LOADERS.has(name) && member && is(k - 2, 'ident', 'process')) {
      findings.push(`${at(tok)}: process.${name}`);
    } else if (LOADER_NAMES.has(name)) {
      findings.push(`${at(tok)}: ${name}, a way to load modules or native code`);
    } else if (REFLECTION_NAMES.has(name)) {
      findings.push(`${at(tok)}: ${name}, reflection that reaches constructors without naming them`);
    } else if (name === 'constructor' && (member || !is(k + 1, 'punct', '('))) {
      findings.push(`${at(tok)}: constructor other than a class's own (from any function it reaches the Function constructor)`);
    } else if (name === 'process' && !(is(k + 1, 'punct', '.') && t(k + 2)?.type === 'ident' && PROCESS_MEMBERS.has(t(k + 2).value))) {
      findings.push(`${at(tok)}: process used other than to read one of ${[...PROCESS_MEMBERS].join(', ')}`);
    }
  }

  const sources = [];
  const markers = comments.filter((c) => /^\/\/ \S+\.[cm]?[jt]sx?$|^\/\/ \S+\.json$/.test(c.value));
  if (markers.length === 0) findings.push('no module comments (// src/xxx.ts): the file is not an unminified esbuild bundle');
  for (const marker of markers) {
    const file = marker.value.slice(3);
    if (!/^src\/(?:[A-Za-z0-9_-]+\/)*[A-Za-z0-9_-][A-Za-z0-9._-]*\.ts$/.test(file)) findings.push(`${position(text, marker.start)}: module ${file} is outside src/`);
    else if (!sources.includes(file)) sources.push(file);
  }
  return { findings, builtins: [...builtins].sort(), sources: sources.sort(), header };
}

/**
 * What the [ at k opens: a computed 'member' (x[k], f()[k], x?.[k], {}[k]); 'member or array'
 * after of or await, which may be variables (of[k]); a computed property 'key' of an object
 * literal, a pattern or a class ({ [k]: v }, after { , } or ;, its ] followed by : or (); or an
 * 'array'.
 */
function bracketKind(tokens, k) {
  const prev = tokens[k - 1];
  if (prev === undefined) return 'array';
  if (prev.type === 'ident') {
    if (KEYWORD_OR_VARIABLE.has(prev.value)) return 'member or array';
    return !REGEX_AFTER_KEYWORD.has(prev.value) || isPunct(tokens[k - 2], '.') ? 'member' : 'array';
  }
  if (prev.type !== 'punct') return prev.type === 'string' || (prev.type === 'template' && !prev.head) || prev.type === 'regex' ? 'member' : 'array';
  if (prev.value === ')' || prev.value === ']' || prev.value === '}' || (prev.value === '.' && isPunct(tokens[k - 2], '?'))) return 'member';
  if (prev.value !== '{' && prev.value !== ',' && prev.value !== ';') return 'array';
  for (let j = k, d = 0; j < tokens.length; j++) {
    if (isPunct(tokens[j], '[')) d++;
    else if (isPunct(tokens[j], ']') && --d === 0) return isPunct(tokens[j + 1], ':') || isPunct(tokens[j + 1], '(') ? 'key' : 'array';
  }
  return 'array';
}

/**
 * A string's or template's text as JavaScript reads it: \x, \u and \u{} escapes, line
 * continuations, octal escapes and the single-character ones. Only compared with names, so an
 * escape it does not know gives the character after the backslash.
 */
function decodeEscapes(raw) {
  if (!raw.includes('\\')) return raw;
  const simple = { n: '\n', r: '\r', t: '\t', b: '\b', f: '\f', v: '\v' };
  return raw.replace(/\\(?:x([0-9a-fA-F]{2})|u\{([0-9a-fA-F]+)\}|u([0-9a-fA-F]{4})|([0-7]{1,3})|(\r\n|[\n\r\u2028\u2029])|([\s\S]))/g, (_, x, braced, u, octal, lineEnd, other) => {
    if (x !== undefined) return String.fromCharCode(parseInt(x, 16));
    if (braced !== undefined) return parseInt(braced, 16) <= 0x10ffff ? String.fromCodePoint(parseInt(braced, 16)) : '';
    if (u !== undefined) return String.fromCharCode(parseInt(u, 16));
    if (octal !== undefined) return String.fromCharCode(parseInt(octal, 8) & 0xff);
    if (lineEnd !== undefined) return '';
    return simple[other] ?? other;
  });
}

/** The header as the report prints it, with what its commit means for a rebuild. */
function describeHeader(header) {
  if (header === null) return '(none)';
  const { version, commit, sourcesSha256, lockfileSha256 } = header;
  const note = commit === 'unknown' ? ' (built outside git: no commit to rebuild from)' : commit.endsWith('-dirty') ? ' (uncommitted changes: the commit alone does not rebuild it)' : '';
  return `credential-proxy ${version}, commit ${commit}${note}\n             sources sha256 ${sourcesSha256}, lockfile sha256 ${lockfileSha256}`;
}

/**
 * Audits the bundle file and renders the report the command prints: { status (0: clean,
 * 1: findings, 2: cannot read the file), stdout (the report), stderr (the verdict on failure) }.
 */
export function auditFile(file = path.join(root, 'dist', 'proxy.js')) {
  let bytes;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    return { status: 2, stdout: '', stderr: `audit-bundle: cannot read ${file} (${err.code ?? err.message}); run npm run build first\n` };
  }
  const text = bytes.toString('utf8');
  const { findings, builtins, sources, header } = auditBundle(text);
  for (const source of sources) {
    if (!existsSync(path.join(root, source))) findings.push(`module ${source} does not exist in ${path.join(root, 'src')}: the bundle is stale`);
  }
  const kib = (bytes.length / 1024).toFixed(1);
  const lines = [
    `audit-bundle: ${path.relative(process.cwd(), file) || file}`,
    `  size:      ${bytes.length} bytes (${kib} KiB), ${text.split('\n').length} lines, sha256 ${createHash('sha256').update(bytes).digest('hex')}`,
    `  header:    ${describeHeader(header)}`,
    `  built-ins: ${builtins.length === 0 ? '(none)' : builtins.join(', ')}`,
    `  sources:   ${sources.length} file(s)`,
    ...sources.map((s) => `    ${s}`),
    `  findings:  ${findings.length === 0 ? 'none' : findings.length}`,
    ...findings.map((f) => `    ${f}`),
  ];
  return {
    status: findings.length === 0 ? 0 : 1,
    stdout: `${lines.join('\n')}\n`,
    stderr: findings.length === 0 ? '' : `audit-bundle: ${findings.length} finding(s) in ${file}\n`,
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const result = auditFile(process.argv[2] === undefined ? undefined : path.resolve(process.argv[2]));
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  process.exitCode = result.status;
}

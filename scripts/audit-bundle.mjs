#!/usr/bin/env node
// Audits the shipped bundle: dist/proxy.js (or the file named on the command line), read by
// TypeScript's parser, the same parser the source audit uses (scripts/audit-source.mjs), and
// held against the lists of scripts/kernel.json. A reviewer runs it on the file they were given,
// after the byte-for-byte rebuild that ties that file to src/ (SECURITY.md, "How to review").
//
//   node scripts/audit-bundle.mjs [FILE]       exit 0: clean; 1: findings; 2: cannot read FILE
//
// Findings (each at its line:column):
// - a text the parser cannot read without an error (fail closed: what it cannot read, it does not
//   vouch for); TypeScript's own syntax and JSX (a type, `as`, `!`, an enum, <a/>: node refuses
//   them, or reads them otherwise); the two places where TypeScript and node read JavaScript
//   apart on purpose: an HTML-like comment (<!-- or -->, a comment to node in a script, code to
//   TypeScript) and a character outside ASCII in code (spaces and letters beyond ASCII, by
//   Unicode versions the two need not share), outside comments, strings, templates and regular
//   expressions (esbuild writes code in ASCII);
// - a free name (one no declaration in the file binds, by JavaScript's scopes: var to its
//   function, let, const, class and a strict-mode function to their block, parameters apart from
//   the body they default from), judged by the rules the source audit shares (audit-rules.mjs)
//   against the union of every file's lists: a global on no list, eval, Function, the global
//   object, the module system (require other than below, module, exports, arguments at the top),
//   a member of a global off its list, a computed member of one, one passed on as a value;
//   process other than process.<member> on the lists, process.on(...) used for its result;
// - require other than as esbuild writes it: `var import_x = require("node:x")` at the top level,
//   one string literal naming a built-in on the lists, the binding declared once and used only as
//   import_x.<member>, the member on the lists; any import or export declaration, any import(),
//   a with statement;
// - a member that reaches a constructor from any value (x.constructor, x.__proto__, a destructured
//   or quoted key), and a string of literals (joined where added or templated) that spells one of
//   them or eval, Function, globalThis, require, module, process: one step from a computed member
//   no audit can follow;
// - code before `"use strict";`, no build header, a module comment (`// src/xxx.ts`, which
//   esbuild writes before each module) naming a file outside src/, or none at all.
// What no audit of the text can see: a name computed at run time from variables (`x[k]`, k
// assembled elsewhere), and what the values a built-in returns reach (a socket's, a context's
// members). The source audit and the kernel's review cover what src/ does with them; that the
// shipped file IS the bundle of src/ is the byte-for-byte rebuild's proof.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chainsProcess, CONSTRUCTOR_MEMBERS, constructorMember, judgeGlobal, UNLISTED } from './audit-rules.mjs';

// require(), not import: Node's ESM loader scans the 9 MB compiler for its named exports first.
const ts = createRequire(import.meta.url)('typescript');
const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const BUILTINS = new Set(builtinModules);
/** A string spelling one of these is a finding: the names above, and the members that reach a constructor. */
const SPELLED = new Set([...UNLISTED.keys(), 'process', ...CONSTRUCTOR_MEMBERS].filter((n) => !['arguments', 'exports', 'global', 'self', 'window'].includes(n)));
/** Node kinds of TypeScript's syntax only, and JSX (which TypeScript reads in a .js file, node never). */
const TYPESCRIPT_ONLY = new Set([ts.SyntaxKind.AsExpression, ts.SyntaxKind.SatisfiesExpression, ts.SyntaxKind.NonNullExpression, ts.SyntaxKind.TypeAssertionExpression, ts.SyntaxKind.EnumDeclaration, ts.SyntaxKind.InterfaceDeclaration, ts.SyntaxKind.TypeAliasDeclaration, ts.SyntaxKind.ModuleDeclaration, ts.SyntaxKind.ImportEqualsDeclaration, ts.SyntaxKind.TypeParameter, ts.SyntaxKind.Decorator, ts.SyntaxKind.JsxElement, ts.SyntaxKind.JsxSelfClosingElement, ts.SyntaxKind.JsxFragment]);
const TYPESCRIPT_MODIFIERS = new Set([ts.SyntaxKind.PublicKeyword, ts.SyntaxKind.PrivateKeyword, ts.SyntaxKind.ProtectedKeyword, ts.SyntaxKind.ReadonlyKeyword, ts.SyntaxKind.DeclareKeyword, ts.SyntaxKind.AbstractKeyword, ts.SyntaxKind.OverrideKeyword, ts.SyntaxKind.AccessorKeyword, ts.SyntaxKind.InKeyword, ts.SyntaxKind.OutKeyword, ts.SyntaxKind.ConstKeyword]);
const LITERAL_TOKENS = new Set([ts.SyntaxKind.StringLiteral, ts.SyntaxKind.NoSubstitutionTemplateLiteral, ts.SyntaxKind.TemplateHead, ts.SyntaxKind.TemplateMiddle, ts.SyntaxKind.TemplateTail, ts.SyntaxKind.RegularExpressionLiteral]);
/** What a scope holds for a name it binds that is not a built-in's binding. */
const BOUND = Object.freeze({});
/** A scope that binds nothing (not entered). */
const NO_NAMES = new Map();
const FUNCTION_LIKE = new Set([ts.SyntaxKind.FunctionDeclaration, ts.SyntaxKind.FunctionExpression, ts.SyntaxKind.ArrowFunction, ts.SyntaxKind.MethodDeclaration, ts.SyntaxKind.Constructor, ts.SyntaxKind.GetAccessor, ts.SyntaxKind.SetAccessor]);

/** What the walk does at a node, by its kind: most kinds have no role (their children are walked). */
const ROLE = { none: 0, typescript: 1, identifier: 2, declaration: 3, function: 4, scope: 5, heritage: 6, module: 7, with: 8, call: 9, member: 10, binding: 11, string: 12 };
const ROLES = new Uint8Array(Object.values(ts.SyntaxKind).filter((k) => typeof k === 'number').reduce((a, b) => Math.max(a, b)) + 1);
for (let kind = 0; kind < ROLES.length; kind++) if (ts.isTypeNode({ kind }) || TYPESCRIPT_ONLY.has(kind)) ROLES[kind] = ROLE.typescript;
for (const [role, kinds] of [
  [ROLE.identifier, [ts.SyntaxKind.Identifier]],
  [ROLE.declaration, [ts.SyntaxKind.Parameter, ts.SyntaxKind.PropertyDeclaration, ts.SyntaxKind.VariableDeclaration, ts.SyntaxKind.VariableStatement]],
  [ROLE.function, [...FUNCTION_LIKE, ts.SyntaxKind.ClassStaticBlockDeclaration]],
  [ROLE.scope, [ts.SyntaxKind.Block, ts.SyntaxKind.CaseBlock, ts.SyntaxKind.ClassDeclaration, ts.SyntaxKind.ClassExpression, ts.SyntaxKind.CatchClause, ts.SyntaxKind.ForStatement, ts.SyntaxKind.ForInStatement, ts.SyntaxKind.ForOfStatement]],
  [ROLE.heritage, [ts.SyntaxKind.ExpressionWithTypeArguments]],
  [ROLE.module, [ts.SyntaxKind.ImportDeclaration, ts.SyntaxKind.ExportDeclaration, ts.SyntaxKind.ExportAssignment]],
  [ROLE.with, [ts.SyntaxKind.WithStatement]],
  [ROLE.call, [ts.SyntaxKind.CallExpression]],
  [ROLE.member, [ts.SyntaxKind.PropertyAccessExpression]],
  [ROLE.binding, [ts.SyntaxKind.BindingElement]],
  [ROLE.string, [ts.SyntaxKind.StringLiteral, ts.SyntaxKind.NoSubstitutionTemplateLiteral, ts.SyntaxKind.TemplateExpression, ts.SyntaxKind.BinaryExpression]],
]) {
  for (const kind of kinds) ROLES[kind] = role;
}

/**
 * What the bundle may reach: the union, over every file, of what scripts/kernel.json lets src/
 * reach (the source audit holds each file to its own share). { modules: Map(module -> Set of
 * members), globals: Map(name -> members), passedOn: Set, process: Set }.
 */
export function bundleAllowlist(declaration) {
  const modules = new Map();
  const grants = [declaration.everywhere, ...Object.values(declaration.files ?? {})];
  for (const grant of grants) for (const [module, members] of Object.entries(grant.modules ?? {})) modules.set(module, new Set([...(modules.get(module) ?? []), ...members]));
  const globals = new Map();
  for (const grant of grants) for (const [name, members] of Object.entries(grant.globals ?? {})) globals.set(name, new Set([...(globals.get(name) ?? []), ...members]));
  const processMembers = new Set([...declaration.everywhere.process, ...grants.flatMap((g) => g.process ?? []), ...(declaration.environment.length > 0 ? ['env'] : [])]);
  return { modules, globals, passedOn: new Set(declaration.everywhere.passedOn), process: processMembers };
}

/** Identifier names a binding pattern (or a plain name) declares. */
function bindingNames(name, out) {
  if (ts.isIdentifier(name)) out.push(name.text);
  else if (ts.isObjectBindingPattern(name) || ts.isArrayBindingPattern(name)) for (const e of name.elements) if (!ts.isOmittedExpression(e)) bindingNames(e.name, out);
  return out;
}

/** The `var` names a function body declares, nested blocks included, nested functions not. */
function varNames(node, out) {
  const visit = (n) => {
    if (FUNCTION_LIKE.has(n.kind) || ts.isClassStaticBlockDeclaration(n) || ts.isClassLike(n)) return;
    if (ts.isVariableDeclarationList(n) && (n.flags & ts.NodeFlags.BlockScoped) === 0) for (const d of n.declarations) bindingNames(d.name, out);
    ts.forEachChild(n, visit);
  };
  ts.forEachChild(node, visit);
  return out;
}

/** The names a list of statements declares in its own block: let, const, class, and (strict mode) function. */
function lexicalNames(statements, out) {
  for (const s of statements) {
    if (ts.isVariableStatement(s) && s.declarationList.flags & ts.NodeFlags.BlockScoped) for (const d of s.declarationList.declarations) bindingNames(d.name, out);
    else if ((ts.isClassDeclaration(s) || ts.isFunctionDeclaration(s)) && s.name) out.push(s.name.text);
  }
  return out;
}

/** Whether an identifier refers to a binding (a value's name in code), rather than declaring one or naming a member or a label. */
function isReference(id, parent) {
  if (ts.isShorthandPropertyAssignment(parent)) return parent.name === id;
  if (parent.name === id) return false;
  if (ts.isBindingElement(parent) && parent.propertyName === id) return false;
  return !(ts.isLabeledStatement(parent) || ts.isBreakOrContinueStatement(parent) || ts.isMetaProperty(parent));
}

/** A string's text once its literals are joined ("ev" + "al"), or undefined when it is not made of literals alone. */
function constantText(node) {
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (ts.isParenthesizedExpression(node)) return constantText(node.expression);
  if (ts.isTemplateExpression(node)) {
    const spans = node.templateSpans.map((span) => [constantText(span.expression), span.literal.text]);
    return spans.some(([text]) => text === undefined) ? undefined : node.head.text + spans.flat().join('');
  }
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    const left = constantText(node.left);
    const right = left === undefined ? undefined : constantText(node.right);
    return right === undefined ? undefined : left + right;
  }
  return undefined;
}

/**
 * What a position of the text is in: 'comment', 'literal' (a string, template or regular
 * expression), or 'code' (a token, or a space between tokens that is not a comment).
 */
function placeOf(sf, at) {
  // The deepest node whose range (its leading spaces and comments included) holds `at`...
  let node = sf;
  for (let next = sf; next !== undefined; ) {
    node = next;
    next = ts.forEachChild(node, (c) => (c.pos <= at && at < c.end ? c : undefined));
  }
  // ... then the token in it that does: `at` is in its text, or in the spaces and comments before it.
  let token = node;
  while (token.getChildCount(sf) > 0) {
    const inside = token.getChildren(sf).find((c) => c.pos <= at && at < c.end);
    if (inside === undefined) break;
    token = inside;
  }
  if (at >= token.getStart(sf)) return LITERAL_TOKENS.has(token.kind) ? 'literal' : 'code';
  const shebang = ts.getShebang(sf.text)?.length ?? 0;
  if (token.pos === 0 && at < shebang) return 'comment';
  const comments = ts.getLeadingCommentRanges(sf.text, token.pos === 0 ? shebang : token.pos) ?? [];
  return comments.some((c) => c.pos <= at && at < c.end) ? 'comment' : 'code';
}

/**
 * What the build header says, from the comments before the first line of code:
 * { version, commit, sourcesSha256, lockfileSha256 }, or null when any of them is missing.
 */
function readHeader(sf) {
  const first = sf.statements[0];
  const text = sf.text.slice(0, first === undefined ? sf.text.length : first.getStart(sf));
  const version = /^\/\/ credential-proxy (\S+): bundled from src\//m.exec(text)?.[1];
  const commit = /^\/\/ source commit: +(\S+)$/m.exec(text)?.[1];
  const sourcesSha256 = /^\/\/ sources sha256: +([0-9a-f]{64})\b/m.exec(text)?.[1];
  const lockfileSha256 = /^\/\/ lockfile sha256: +([0-9a-f]{64})\b/m.exec(text)?.[1];
  if (!version || !commit || !sourcesSha256 || !lockfileSha256) return null;
  return { version, commit, sourcesSha256, lockfileSha256 };
}

const PARSE_OPTIONS = { languageVersion: ts.ScriptTarget.ESNext, jsDocParsingMode: ts.JSDocParsingMode.ParseNone };

/**
 * `text` parsed as an edit of the text `previous` holds (TypeScript's incremental parser, as an
 * editor reparses a file after each keystroke: the same tree a whole parse gives, in a fraction of
 * the time), which it consumes. For tests that audit many edited copies of one bundle; the
 * command always parses whole.
 */
function reparsed(previous, text) {
  const old = previous.text;
  let start = 0;
  while (start < old.length && start < text.length && old.charCodeAt(start) === text.charCodeAt(start)) start++;
  let tail = 0;
  while (tail < old.length - start && tail < text.length - start && old.charCodeAt(old.length - 1 - tail) === text.charCodeAt(text.length - 1 - tail)) tail++;
  return ts.updateSourceFile(previous.sourceFile, text, { span: { start, length: old.length - start - tail }, newLength: text.length - start - tail });
}

/**
 * Audits bundle text against `allow` (bundleAllowlist). Returns { findings, builtins: { module:
 * [members] }, globals: [free names], sources: [src files of the module comments], header,
 * parsed: { text, sourceFile } }. `previous`: the `parsed` of an audit before, to read `text` as an
 * edit of it (reparsed).
 */
export function auditBundle(text, allow, previous) {
  const sf = previous === undefined ? ts.createSourceFile('proxy.js', text, PARSE_OPTIONS, false, ts.ScriptKind.JS) : reparsed(previous, text);
  const findings = [];
  const position = (at) => {
    const { line, character } = sf.getLineAndCharacterOfPosition(at);
    return `${line + 1}:${character + 1}`;
  };
  const find = (node, message) => findings.push(`${position(node.getStart(sf))}: ${message}`);
  const used = new Map();
  const globals = new Set();

  // Fail closed on what the parser could not read, and on where it reads otherwise than node.
  const diagnostics = sf.parseDiagnostics;
  if (!Array.isArray(diagnostics)) findings.push('the parser gives no diagnostics to check: the audit cannot vouch for its reading');
  for (const d of diagnostics ?? []) findings.push(`${position(d.start)}: cannot parse: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
  for (const m of text.matchAll(/[^\x00-\x7f]|<!--|-->/g)) {
    if (placeOf(sf, m.index) !== 'code') continue;
    findings.push(`${position(m.index)}: ${m[0].length === 1 ? `a character outside ASCII in code (U+${m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}), which JavaScript may read as a space or a letter` : 'an HTML-like comment (<!-- or -->), which node reads as a line comment'}`);
  }

  // The directive first (code before it runs outside strict mode), then the header.
  const first = sf.statements[0];
  if (!(first && ts.isExpressionStatement(first) && ts.isStringLiteral(first.expression) && first.getText(sf) === '"use strict";')) findings.push('the code does not begin with "use strict";');
  const header = readHeader(sf);
  if (header === null) findings.push('no build header (version, source commit, sources and lockfile sha256): the file was not built by build.mjs');

  // Module comments: those before a top-level statement (and at the end), as esbuild writes them.
  const sources = new Set();
  let markers = 0;
  for (const at of [...sf.statements.map((s) => s.pos), sf.endOfFileToken.pos]) {
    for (const c of ts.getLeadingCommentRanges(text, at) ?? []) {
      const m = /^\/\/ (\S+\.(?:[cm]?[jt]sx?|json))$/.exec(text.slice(c.pos, c.end));
      if (m === null) continue;
      markers++;
      if (!/^src\/(?:[A-Za-z0-9_-]+\/)*[A-Za-z0-9_-][A-Za-z0-9._-]*\.ts$/.test(m[1])) findings.push(`${position(c.pos)}: module ${m[1]} is outside src/`);
      else sources.add(m[1]);
    }
  }
  if (markers === 0) findings.push('no module comments (// src/xxx.ts): the file is not an unminified esbuild bundle');

  // Scopes: each a Map of the names it binds to what binds them ({ module } for esbuild's require binding).
  const bind = (scope, names) => {
    for (const n of names) scope.set(n, BOUND);
    return scope;
  };
  // A chain of scopes: { names, up }, innermost first; a scope that binds nothing is not made.
  const lookup = (chain, name) => {
    for (let s = chain; s !== undefined; s = s.up) {
      const info = s.names.get(name);
      if (info !== undefined) return info;
    }
    return undefined;
  };
  const enter = (chain, names) => (names.size === 0 ? chain : { names, up: chain });
  const topNames = [...varNames(sf, []), ...lexicalNames(sf.statements, [])];
  const top = bind(new Map(), topNames);
  // esbuild's bindings of the built-ins: `var import_x = require("node:x");` at the top level,
  // each declared once.
  for (const s of sf.statements) {
    if (!ts.isVariableStatement(s) || s.declarationList.declarations.length !== 1) continue;
    const d = s.declarationList.declarations[0];
    if (ts.isIdentifier(d.name) && d.initializer && isLiteralRequire(d.initializer) && allow.modules.has(d.initializer.arguments[0].text)) {
      const once = topNames.filter((n) => n === d.name.text).length === 1;
      top.set(d.name.text, once ? { module: d.initializer.arguments[0].text, declared: d.initializer } : { twice: true });
    }
  }

  const checkRequire = (call, parent) => {
    if (call.arguments.length !== 1 || !ts.isStringLiteral(call.arguments[0])) return find(call, 'require with an argument that is not one string literal');
    const module = call.arguments[0].text;
    if (!module.startsWith('node:') || !BUILTINS.has(module.slice(5))) return find(call.arguments[0], `require("${module}") is not a node: built-in`);
    if (!allow.modules.has(module)) return find(call.arguments[0], `require("${module}"): a built-in no list of scripts/kernel.json grants`);
    const declared = ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name) && top.get(parent.name.text)?.declared === call;
    if (!declared) find(call, `require("${module}") other than as esbuild writes it (var import_x = require("${module}") at the top level)`);
  };

  const checkBinding = (id, info, parent) => {
    if (info.twice) return find(id, `${id.text}: a built-in's binding declared twice`);
    if (!ts.isPropertyAccessExpression(parent) || parent.expression !== id || !ts.isIdentifier(parent.name)) return find(id, `${id.text} (${info.module}) used other than as ${id.text}.<member>`);
    const member = parent.name.text;
    (used.get(info.module) ?? used.set(info.module, new Set()).get(info.module)).add(member);
    if (!allow.modules.get(info.module).has(member)) find(parent.name, `${info.module} ${member}: not a member the lists of scripts/kernel.json grant`);
  };

  const checkFree = (id, parent) => {
    globals.add(id.text);
    if (id.text === 'require' && ts.isCallExpression(parent) && parent.expression === id) return; // judged with its call
    const judged = id.text === 'require' ? ['require used other than as a direct call', id] : judgeGlobal(ts, id, parent, allow);
    if (judged !== undefined) find(judged[1], judged[0]);
  };


  // The walk: scopes entered as JavaScript opens them, every reference resolved or judged free.
  // Where the text spells `var` (in code or not): a body that does not, declares no var, and its
  // nodes are not walked twice.
  const varAt = Array.from(text.matchAll(/\bvar\b/g), (m) => m.index);
  const hasVar = (node) => {
    let low = 0;
    let high = varAt.length;
    while (low < high) {
      const mid = (low + high) >> 1;
      if (varAt[mid] < node.pos) low = mid + 1;
      else high = mid;
    }
    return low < varAt.length && varAt[low] < node.end;
  };
  const typescript = (node) => find(node, `TypeScript syntax (${ts.SyntaxKind[node.kind]}), which node refuses or reads otherwise`);
  const checkModifiers = (node) => {
    for (const m of node.modifiers ?? []) {
      if (m.kind === ts.SyntaxKind.ExportKeyword || m.kind === ts.SyntaxKind.DefaultKeyword) find(m, 'an import or export declaration in a CommonJS bundle');
      else if (ts.isDecorator(m) || (TYPESCRIPT_MODIFIERS.has(m.kind) && !(m.kind === ts.SyntaxKind.ConstKeyword && ts.isVariableStatement(node)))) typescript(m);
    }
    if (node.questionToken !== undefined || node.exclamationToken !== undefined) typescript(node);
  };
  const checkString = (node, parent) => {
    // A string of literals alone (joined where they are added), judged once: at its outermost +.
    if (ts.isBinaryExpression(node) && node.operatorToken.kind !== ts.SyntaxKind.PlusToken) return;
    if (ts.isBinaryExpression(parent) && parent.operatorToken.kind === ts.SyntaxKind.PlusToken && constantText(parent) !== undefined) return;
    const spelled = constantText(node);
    if (spelled !== undefined && SPELLED.has(spelled)) find(node, `a string spelling ${spelled}`);
  };

  // The walk: scopes entered as JavaScript opens them, every reference resolved or judged free.
  // Each node kind has one role (ROLES), so that most nodes cost a table lookup.
  const walk = (node, parent, chain) => {
    switch (ROLES[node.kind]) {
      case ROLE.typescript:
        return typescript(node);
      case ROLE.identifier:
        // A name the parser made up for one missing (a parse error, found above) is not judged.
        if (node.text !== '' && isReference(node, parent)) {
          const info = lookup(chain, node.text);
          if (info === undefined) checkFree(node, parent);
          else if (info !== BOUND) checkBinding(node, info, parent);
        }
        return undefined;
      case ROLE.declaration:
        checkModifiers(node);
        break;
      case ROLE.function:
        checkModifiers(node);
        return walkFunction(node, chain);
      case ROLE.scope:
        if (ts.isClassLike(node)) checkModifiers(node);
        return walkChildren(node, enter(chain, scopeNames(node)));
      case ROLE.heritage:
        // A class's base is an ExpressionWithTypeArguments in a JavaScript file too: without type
        // arguments, in `extends`, it is JavaScript.
        if (node.typeArguments !== undefined || !ts.isHeritageClause(parent) || parent.token !== ts.SyntaxKind.ExtendsKeyword) return typescript(node);
        return walk(node.expression, node, chain);
      case ROLE.module:
        return find(node, 'an import or export declaration in a CommonJS bundle');
      case ROLE.with:
        return find(node, "a with statement, which makes any name any object's member");
      case ROLE.call:
        if (ts.isIdentifier(node.expression) && node.expression.text === 'require' && lookup(chain, 'require') === undefined) checkRequire(node, parent);
        if (node.expression.kind === ts.SyntaxKind.ImportKeyword) find(node, `a dynamic import()${node.arguments[0] && ts.isStringLiteral(node.arguments[0]) ? ` of ${node.arguments[0].text}` : ''}: the bundle loads built-ins by esbuild's require alone`);
        if (chainsProcess(ts, node, parent) && lookup(chain, 'process') === undefined) find(node, `process.${node.expression.name.text}(...) used for its result, which is process itself`);
        break;
      case ROLE.member:
        if (CONSTRUCTOR_MEMBERS.has(node.name.text)) find(node.name, constructorMember(node.name.text));
        break;
      case ROLE.binding:
        if (node.propertyName && (ts.isIdentifier(node.propertyName) || ts.isStringLiteral(node.propertyName)) && CONSTRUCTOR_MEMBERS.has(node.propertyName.text)) find(node.propertyName, constructorMember(node.propertyName.text));
        break;
      case ROLE.string:
        checkString(node, parent);
        break;
    }
    return walkChildren(node, chain);
  };

  /** A function: its parameters (and its own name, and arguments) in a scope of theirs, then its body's declarations in one within. */
  const walkFunction = (node, chain) => {
    if (node.typeParameters !== undefined || node.type !== undefined) typescript(node);
    if (node.name !== undefined && !ts.isFunctionExpression(node)) walk(node.name, node, chain);
    const own = [];
    for (const p of node.parameters ?? []) bindingNames(p.name, own);
    if (ts.isFunctionExpression(node) && node.name) own.push(node.name.text);
    if (!ts.isArrowFunction(node) && !ts.isClassStaticBlockDeclaration(node)) own.push('arguments');
    const inner = enter(chain, bind(new Map(), own));
    for (const p of node.parameters ?? []) walk(p, node, inner);
    const body = node.body;
    if (body !== undefined && ts.isBlock(body)) {
      const declared = lexicalNames(body.statements, hasVar(body) ? varNames(body, []) : []);
      const scope = declared.length === 0 ? inner : enter(inner, bind(new Map(), declared));
      for (const s of body.statements) walk(s, body, scope);
    } else if (body !== undefined) walk(body, node, inner);
  };

  /** What a block-like node binds for its own children: let, const, class, function; a class its name; catch its parameter; a for its let or const. */
  const scopeNames = (node) => {
    const names = [];
    if (ts.isBlock(node)) lexicalNames(node.statements, names);
    else if (ts.isCaseBlock(node)) for (const c of node.clauses) lexicalNames(c.statements, names);
    else if (ts.isClassLike(node)) {
      if (node.name) names.push(node.name.text);
    } else if (ts.isCatchClause(node)) {
      if (node.variableDeclaration) bindingNames(node.variableDeclaration.name, names);
    } else if (node.initializer && ts.isVariableDeclarationList(node.initializer) && node.initializer.flags & ts.NodeFlags.BlockScoped) for (const d of node.initializer.declarations) bindingNames(d.name, names);
    return names.length === 0 ? NO_NAMES : bind(new Map(), names);
  };

  // The children of a node, with one callback for the whole walk (not a closure a node).
  let parentNow;
  let chainNow;
  const visitChild = (child) => walk(child, parentNow, chainNow);
  const walkChildren = (node, chain) => {
    const [parent, scopes] = [parentNow, chainNow];
    parentNow = node;
    chainNow = chain;
    ts.forEachChild(node, visitChild);
    [parentNow, chainNow] = [parent, scopes];
  };
  walkChildren(sf, { names: top, up: undefined });

  return {
    findings,
    builtins: Object.fromEntries([...used].sort(([a], [b]) => a.localeCompare(b)).map(([m, members]) => [m, [...members].sort()])),
    globals: [...globals].sort(),
    sources: [...sources].sort(),
    header,
    parsed: { text, sourceFile: sf },
  };
}

/** Whether `node` is `require("...")`, one plain string literal. */
function isLiteralRequire(node) {
  return ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'require' && node.arguments.length === 1 && ts.isStringLiteral(node.arguments[0]);
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
 * 1: findings, 2: cannot read the file), stdout (the report), stderr (the verdict on failure),
 * parsed (for `previous`) }. `previous`: the `parsed` of an audit before, whose text this file's
 * is an edit of (auditBundle).
 */
export function auditFile(file = path.join(root, 'dist', 'proxy.js'), previous = undefined) {
  let bytes;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    return { status: 2, stdout: '', stderr: `audit-bundle: cannot read ${file} (${err.code ?? err.message}); run npm run build first\n` };
  }
  const text = bytes.toString('utf8');
  const declaration = JSON.parse(readFileSync(path.join(root, 'scripts', 'kernel.json'), 'utf8'));
  const { findings, builtins, globals, sources, header, parsed } = auditBundle(text, bundleAllowlist(declaration), previous);
  for (const source of sources) {
    if (!existsSync(path.join(root, source))) findings.push(`module ${source} does not exist in ${path.join(root, 'src')}: the bundle is stale`);
  }
  const kib = (bytes.length / 1024).toFixed(1);
  const lines = [
    `audit-bundle: ${path.relative(process.cwd(), file) || file}`,
    `  size:      ${bytes.length} bytes (${kib} KiB), ${text.split('\n').length} lines, sha256 ${createHash('sha256').update(bytes).digest('hex')}`,
    `  header:    ${describeHeader(header)}`,
    `  built-ins: ${Object.keys(builtins).length === 0 ? '(none)' : Object.keys(builtins).join(', ')}`,
    ...Object.entries(builtins).map(([m, members]) => `    ${m}: ${members.join(', ')}`),
    `  globals:   ${globals.join(', ')}`,
    `  sources:   ${sources.length} file(s)`,
    ...sources.map((s) => `    ${s}`),
    `  findings:  ${findings.length === 0 ? 'none' : findings.length}`,
    ...findings.map((f) => `    ${f}`),
  ];
  return {
    status: findings.length === 0 ? 0 : 1,
    stdout: `${lines.join('\n')}\n`,
    stderr: findings.length === 0 ? '' : `audit-bundle: ${findings.length} finding(s) in ${file}\n`,
    parsed,
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const result = auditFile(process.argv[2] === undefined ? undefined : path.resolve(process.argv[2]));
  process.stdout.write(result.stdout);
  process.stderr.write(result.stderr);
  process.exitCode = result.status;
}

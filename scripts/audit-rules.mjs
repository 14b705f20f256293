// The rules the source audit (audit-source.mjs, on src/ with TypeScript's checker) and the bundle
// audit (audit-bundle.mjs, on dist/proxy.js with TypeScript's parser) share: what a name that no
// declaration binds (a global) may be, and how it may be used. Each audit decides which names are
// free in its own way; both judge them here, against lists that scripts/kernel.json holds.

/** Members that reach a constructor, and from it the Function constructor, from any value. */
export const CONSTRUCTOR_MEMBERS = new Set(['constructor', '__proto__', '__defineGetter__', '__defineSetter__', '__lookupGetter__', '__lookupSetter__']);

/** process's methods that return process (an EventEmitter chains): their result is not used. */
const RETURNS_PROCESS = new Set(['on', 'once', 'off', 'addListener', 'removeListener', 'prependListener', 'prependOnceListener', 'removeAllListeners', 'setMaxListeners']);

/** Names on no list, whatever it says, each with what it reaches. */
export const UNLISTED = new Map([
  ['eval', 'eval: code from a string'],
  ['Function', 'the Function constructor: code from a string'],
  ...['globalThis', 'global', 'window', 'self'].map((n) => [n, `${n}, the global object: every global by any name`]),
  ...['require', 'module', 'exports', '__filename', '__dirname', 'arguments'].map((n) => [n, `${n}: the module system (at the top level, arguments holds require)`]),
]);

/** Globals that are values, not namespaces: used as they are. */
const VALUES = new Set(['undefined', 'NaN', 'Infinity']);

/**
 * Judges a global: `id` an identifier no declaration binds, `parent` the node around it. `grants`:
 * { globals: Map(name -> Set of members), passedOn: Set, process: Set of members }. Returns a
 * finding (a message, the node it is at), or undefined. A global is on the list, and used as
 * X.member (the member on its list), called, constructed, the right of instanceof, under typeof,
 * or a class's base; passed on as a value, its members would be out of the list's reach.
 */
export function judgeGlobal(ts, id, parent, grants) {
  const name = id.text;
  if (UNLISTED.has(name)) return [UNLISTED.get(name), id];
  if (name === 'process') return judgeProcess(ts, id, parent, grants);
  const members = grants.globals.get(name);
  if (members === undefined) return [`the global ${name}: on no list`, id];
  if (ts.isElementAccessExpression(parent) && parent.expression === id) return [`a computed member of the global ${name}`, id];
  if (ts.isPropertyAccessExpression(parent) && parent.expression === id) {
    return members.has(parent.name.text) ? undefined : [`${name}.${parent.name.text}: not among the members of ${name} the lists grant (${[...members].join(', ') || 'none'})`, parent.name];
  }
  if (VALUES.has(name) || grants.passedOn.has(name)) return undefined;
  const direct =
    (ts.isCallExpression(parent) && parent.expression === id) ||
    (ts.isNewExpression(parent) && parent.expression === id) ||
    (ts.isBinaryExpression(parent) && parent.right === id && parent.operatorToken.kind === ts.SyntaxKind.InstanceOfKeyword) ||
    ts.isTypeOfExpression(parent) ||
    ts.isExpressionWithTypeArguments(parent);
  return direct ? undefined : [`the global ${name} passed on as a value`, id];
}

/** process: only process.<member>, the member on the lists. */
function judgeProcess(ts, id, parent, grants) {
  if (!ts.isPropertyAccessExpression(parent) || parent.expression !== id || !ts.isIdentifier(parent.name)) return ['process used other than as process.<member>', id];
  const member = parent.name.text;
  return grants.process.has(member) ? undefined : [`process.${member}: not a member the lists grant`, parent.name];
}

/** A call of process.on(...) (or another method that returns process) whose result is used: process itself, out of the list's reach. */
export function chainsProcess(ts, call, parent) {
  const callee = call.expression;
  return ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression) && callee.expression.text === 'process' && RETURNS_PROCESS.has(callee.name.text) && !ts.isExpressionStatement(parent);
}

/** A member name that reaches a constructor (x.constructor, x["constructor"], { constructor: c } = x), or undefined. */
export function constructorMember(name) {
  return CONSTRUCTOR_MEMBERS.has(name) ? `the member ${name}: from any value it reaches a constructor, and from there the Function constructor` : undefined;
}

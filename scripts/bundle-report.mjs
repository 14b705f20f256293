// What dist/proxy.js holds, read from esbuild's metafile and the bundle's own text: bytes per
// feature area (src/ folder) against the budgets in scripts/size-budget.json, and the names
// esbuild renamed because two modules declare the same one (against the allowlist in
// scripts/name-clashes.json). build.mjs prints both; test/integration/bundle-report.test.ts
// fails on an area over its budget or a clash not in the allowlist. Pure functions: no file is read here
// except the two data files, by their loaders.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

const here = path.dirname(fileURLToPath(import.meta.url));
export const SIZE_BUDGET_FILE = path.join(here, 'size-budget.json');
export const NAME_CLASHES_FILE = path.join(here, 'name-clashes.json');

/** The feature area of a bundled file: its folder (src/gateway/protocols), or the file itself at src/'s top (src/main.ts). */
export function areaOf(file) {
  const dir = path.posix.dirname(file);
  return dir === 'src' ? file : dir;
}

/**
 * Bytes in the output per area, from the metafile of a build with one output:
 * { areas: [{ area, bytes, files }] largest first, other (esbuild's wrapper and helpers, the
 * header), total }.
 */
export function sizesByArea(metafile) {
  const outputs = Object.values(metafile.outputs);
  if (outputs.length !== 1) throw new Error(`expected one output in the metafile, found ${outputs.length}`);
  const [output] = outputs;
  const byArea = new Map();
  let attributed = 0;
  for (const [file, { bytesInOutput }] of Object.entries(output.inputs)) {
    const area = areaOf(file);
    const entry = byArea.get(area) ?? { area, bytes: 0, files: 0 };
    entry.bytes += bytesInOutput;
    entry.files += 1;
    byArea.set(area, entry);
    attributed += bytesInOutput;
  }
  const areas = [...byArea.values()].sort((a, b) => b.bytes - a.bytes || (a.area < b.area ? -1 : 1));
  return { areas, other: output.bytes - attributed, total: output.bytes };
}

/** The budgets, in KiB per area and for the whole file ("total"). */
export function loadSizeBudget(file = SIZE_BUDGET_FILE) {
  const { budgetsKiB } = JSON.parse(readFileSync(file, 'utf8'));
  return budgetsKiB;
}

/**
 * Each area (and the total) against its budget: [{ area, bytes, budgetBytes (null: no budget),
 * over }]. An area without a budget counts as over: a new folder gets its figure on purpose.
 */
export function checkSizeBudget(sizes, budgetsKiB) {
  const rows = [...sizes.areas.map(({ area, bytes }) => ({ area, bytes })), { area: 'total', bytes: sizes.total }];
  return rows.map(({ area, bytes }) => {
    const kib = budgetsKiB[area];
    const budgetBytes = typeof kib === 'number' ? Math.round(kib * 1024) : null;
    return { area, bytes, budgetBytes, over: budgetBytes === null || bytes > budgetBytes };
  });
}

/** Budget rows that no longer match an area of the bundle (a folder renamed or emptied). */
export function unusedBudgets(sizes, budgetsKiB) {
  const areas = new Set([...sizes.areas.map((a) => a.area), 'total']);
  return Object.keys(budgetsKiB).filter((area) => !areas.has(area)).sort();
}

const WORD = /[A-Za-z_$][\w$]*/g;

/**
 * The identifiers esbuild renamed in the bundle: a name ending in digits (reject2, readUsage3)
 * that no source file spells, whose stem without the digits a source file does spell. esbuild
 * hoists every module into one scope and numbers a name that another module already declares;
 * its own names (import_node_crypto2, __export) have no stem in src/ and are left out.
 * `sources` maps each bundled file (src/...) to its text. Returns
 * [{ name, stem, module, count }] sorted by stem, module and name; `module` is the file whose
 * code uses the renamed name (from esbuild's `// src/...` marker before each module).
 */
export function renamedIdentifiers(bundleText, sources) {
  if (lastRenamed?.text === bundleText && lastRenamed.sources === sources) return lastRenamed.renamed;
  const renamed = findRenamed(bundleText, sources);
  lastRenamed = { text: bundleText, sources, renamed };
  return renamed;
}

/** The last text looked through, and what was found (a test asks for the same bundle's names again). */
let lastRenamed;

function findRenamed(bundleText, sources) {
  const spelled = new Set();
  for (const text of Object.values(sources)) for (const [word] of text.matchAll(WORD)) spelled.add(word);
  // require(), not import, and here: the compiler is loaded only when the names are looked for
  // (build.mjs keeps them by the bundle's digest), and Node's ESM loader would scan its 9 MB first.
  const ts = require('typescript');
  const sf = ts.createSourceFile('proxy.js', bundleText, { languageVersion: ts.ScriptTarget.ESNext, jsDocParsingMode: ts.JSDocParsingMode.ParseNone }, false, ts.ScriptKind.JS);
  // esbuild's module markers, before the top-level statements: [position, file], in order.
  const markers = [];
  for (const statement of sf.statements) {
    for (const c of ts.getLeadingCommentRanges(bundleText, statement.pos) ?? []) {
      const m = /^\/\/ (src\/\S+\.ts)$/.exec(bundleText.slice(c.pos, c.end));
      if (m !== null) markers.push([c.pos, m[1]]);
    }
  }
  const found = new Map();
  const visit = (node, parent) => {
    // Every identifier but a member's name after a dot (a property is never renamed).
    if (ts.isIdentifier(node) && !(ts.isPropertyAccessExpression(parent) && parent.name === node) && !spelled.has(node.text)) {
      const parts = /^(.*[^\d])(\d+)$/.exec(node.text);
      if (parts !== null && spelled.has(parts[1])) {
        const at = node.pos;
        let m = -1;
        while (m + 1 < markers.length && markers[m + 1][0] < at) m++;
        const module = m >= 0 ? markers[m][1] : '(before the first module)';
        const key = `${node.text}\0${module}`;
        const entry = found.get(key) ?? { name: node.text, stem: parts[1], module, count: 0 };
        entry.count += 1;
        found.set(key, entry);
      }
    }
    ts.forEachChild(node, (child) => visit(child, node));
  };
  visit(sf, undefined);
  return [...found.values()].sort((a, b) => cmp(a.stem, b.stem) || cmp(a.module, b.module) || cmp(a.name, b.name));
}

const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The allowlist: the source names (stems) esbuild renamed when it was recorded. Keyed by name,
 * not by module, so that moving code between files is not a new clash; a name not in it is.
 */
export function loadNameClashes(file = NAME_CLASHES_FILE) {
  const { allowed } = JSON.parse(readFileSync(file, 'utf8'));
  return allowed;
}

/** Each renamed stem with the modules that carry a numbered copy: { stem: [modules] }. */
export function clashesByStem(renamed) {
  const byStem = {};
  for (const { stem, module } of renamed) {
    byStem[stem] ??= [];
    if (!byStem[stem].includes(module)) byStem[stem].push(module);
  }
  for (const stem of Object.keys(byStem)) byStem[stem].sort();
  return byStem;
}

/**
 * The renamed identifiers against the allowlist (a list of stems): { added: renamed entries
 * whose stem is not allowed, gone: allowed stems the build no longer renames (shrink the list) }.
 */
export function compareClashes(renamed, allowed) {
  const ok = new Set(allowed);
  const now = new Set(renamed.map((r) => r.stem));
  return { added: renamed.filter((r) => !ok.has(r.stem)), gone: allowed.filter((stem) => !now.has(stem)) };
}

const kib = (bytes) => (bytes / 1024).toFixed(1);

/** The size table: each area against its budget, largest first, then what no file accounts for and the total. */
export function formatSizes(sizes, budgetsKiB) {
  const rows = checkSizeBudget(sizes, budgetsKiB);
  const total = rows.pop();
  const OTHER = 'other (header, esbuild)';
  const width = Math.max(OTHER.length, ...rows.map((r) => r.area.length));
  const budget = (r) => ` / ${r.budgetBytes === null ? 'none'.padStart(6) : kib(r.budgetBytes).padStart(6)}${r.over ? '  OVER BUDGET' : ''}`;
  const line = (label, bytes, rest = '') => `  ${label.padEnd(width)} ${kib(bytes).padStart(6)}${rest}`;
  return [
    'size by area (KiB in dist/proxy.js / budget in scripts/size-budget.json):',
    ...rows.map((r) => line(r.area, r.bytes, budget(r))),
    line(OTHER, sizes.other),
    line('total', total.bytes, budget(total)),
    ...unusedBudgets(sizes, budgetsKiB).map((area) => `  (a budget for ${area}, which the bundle no longer has)`),
  ];
}

/** The renamed names in one line, then each clash the allowlist does not hold, then what it holds in vain. */
export function formatClashes(renamed, allowed) {
  const { added, gone } = compareClashes(renamed, allowed);
  const names = new Map(renamed.map((r) => [r.name, r.stem]));
  const uses = renamed.reduce((n, r) => n + r.count, 0);
  return [
    `renamed by esbuild (one scope for all modules: a name another module declares is numbered): ${names.size === 0 ? 'none' : `${names.size} name(s), ${uses} use(s)`}`,
    ...(names.size === 0 ? [] : [`  ${[...names].map(([name, stem]) => `${stem}->${name}`).join(', ')}`]),
    ...added.map((r) => `  NEW CLASH: ${r.stem} numbered ${r.name} in ${r.module} (not in scripts/name-clashes.json)`),
    ...(gone.length === 0 ? [] : [`  no longer renamed (remove from scripts/name-clashes.json): ${gone.join(', ')}`]),
  ];
}

/** The lines build.mjs prints after its own: the size table, then the renamed names. */
export function formatReport({ sizes, budgetsKiB, renamed, allowed }) {
  return [...formatSizes(sizes, budgetsKiB), ...formatClashes(renamed, allowed)];
}

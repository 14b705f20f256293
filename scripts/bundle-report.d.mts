import type { Metafile } from 'esbuild';

export const SIZE_BUDGET_FILE: string;
export const NAME_CLASHES_FILE: string;

export interface AreaSize {
  readonly area: string;
  readonly bytes: number;
  readonly files: number;
}
export interface Sizes {
  readonly areas: readonly AreaSize[];
  /** Bytes no source file accounts for: the header and esbuild's wrapper and helpers. */
  readonly other: number;
  readonly total: number;
}
export interface BudgetRow {
  readonly area: string;
  readonly bytes: number;
  /** null: the area has no budget (counts as over). */
  readonly budgetBytes: number | null;
  readonly over: boolean;
}
export interface Renamed {
  readonly name: string;
  readonly stem: string;
  readonly module: string;
  readonly count: number;
}
export type Budgets = Readonly<Record<string, number>>;
/** The source names esbuild may rename (a list to shrink). */
export type Allowed = readonly string[];

export function areaOf(file: string): string;
export function sizesByArea(metafile: Metafile): Sizes;
export function loadSizeBudget(file?: string): Budgets;
export function checkSizeBudget(sizes: Sizes, budgetsKiB: Budgets): BudgetRow[];
export function unusedBudgets(sizes: Sizes, budgetsKiB: Budgets): string[];
export function renamedIdentifiers(bundleText: string, sources: Readonly<Record<string, string>>): Renamed[];
export function loadNameClashes(file?: string): Allowed;
export function clashesByStem(renamed: readonly Renamed[]): Record<string, string[]>;
export function compareClashes(renamed: readonly Renamed[], allowed: Allowed): { added: Renamed[]; gone: string[] };
export function formatSizes(sizes: Sizes, budgetsKiB: Budgets): string[];
export function formatClashes(renamed: readonly Renamed[], allowed: Allowed): string[];
export function formatReport(report: { sizes: Sizes; budgetsKiB: Budgets; renamed: readonly Renamed[]; allowed: Allowed }): string[];

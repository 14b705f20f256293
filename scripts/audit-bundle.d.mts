/** A bundle's text and its parse, to audit an edit of it without parsing it whole again. */
export interface Parsed {
  readonly text: string;
  readonly sourceFile: unknown;
}
export interface AuditResult {
  /** 0: clean; 1: findings; 2: the file cannot be read. */
  readonly status: 0 | 1 | 2;
  /** The report the command prints on stdout. */
  readonly stdout: string;
  /** The verdict the command prints on stderr when the audit fails. */
  readonly stderr: string;
  /** The text audited and its parse (undefined when the file could not be read), for `previous`. */
  readonly parsed?: Parsed;
}
/** `previous`: the `parsed` of an audit before, whose text this file's is an edit of (it is consumed). */
export function auditFile(file?: string, previous?: Parsed): AuditResult;
export interface Allowlist {
  readonly modules: ReadonlyMap<string, ReadonlySet<string>>;
  readonly globals: ReadonlyMap<string, ReadonlySet<string>>;
  readonly passedOn: ReadonlySet<string>;
  readonly process: ReadonlySet<string>;
}
export function bundleAllowlist(declaration: unknown): Allowlist;
export function auditBundle(text: string, allow: Allowlist, previous?: Parsed): { readonly findings: readonly string[]; readonly parsed: Parsed };

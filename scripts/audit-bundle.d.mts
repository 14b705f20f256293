export interface AuditResult {
  /** 0: clean; 1: findings; 2: the file cannot be read. */
  readonly status: 0 | 1 | 2;
  /** The report the command prints on stdout. */
  readonly stdout: string;
  /** The verdict the command prints on stderr when the audit fails. */
  readonly stderr: string;
}
export function auditFile(file?: string): AuditResult;

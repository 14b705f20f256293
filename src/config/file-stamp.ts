// When a file read again only on change has changed (secrets, the deny list, a key set, the
// workload policy): the change time catches a rewrite that put the modification time back.
import { statSync } from 'node:fs';

/** The file's stamp; throws what stat throws (ENOENT, ENOTDIR: no such file). */
export function fileStamp(path: string): string {
  const st = statSync(path);
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
}

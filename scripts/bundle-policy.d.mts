import type { Plugin } from 'esbuild';
export function onlySrcAndBuiltins(srcDir: string, root: string): Plugin;

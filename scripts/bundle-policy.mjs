// The esbuild plugin that keeps dist/proxy.js auditable: it may contain files from src/ and
// import node: built-ins (with the prefix), nothing else. Used by build.mjs and its test.
import { builtinModules } from 'node:module';
import path from 'node:path';

const builtins = new Set(builtinModules);

export function onlySrcAndBuiltins(srcDir, root) {
  return {
    name: 'only-src-and-node-builtins',
    setup(b) {
      b.onResolve({ filter: /.*/ }, (args) => {
        if (args.kind === 'entry-point') return undefined;
        if (args.path.startsWith('node:')) {
          if (!builtins.has(args.path.slice(5))) return { errors: [{ text: `${args.path} is not a Node built-in` }] };
          return { path: args.path, external: true };
        }
        if (!args.path.startsWith('.')) {
          return { errors: [{ text: `"${args.path}" imported by ${path.relative(root, args.importer)}: only node: built-ins (with the node: prefix) and files in src/ may be bundled` }] };
        }
        const resolved = path.resolve(args.resolveDir, args.path);
        if (!resolved.startsWith(srcDir)) {
          return { errors: [{ text: `${path.relative(root, resolved)} is outside src/ and may not be bundled` }] };
        }
        return undefined;
      });
    },
  };
}

// The release's SBOM, CycloneDX 1.6 JSON, as a pure function of what the release read: what the
// file is (its name, version, licence, SHA-256, provenance and the node: built-ins it requires),
// what runs it (nothing but Node: no component at run time, and a dependency graph that says so,
// complete), and what built it (the packages npm ci installed from package-lock.json, each with
// scope "excluded", never reachable at run time, and the node that ran the build).
//
// Reproducible: no serial number (CycloneDX asks for a new one at every generation, which two
// builds of one commit must not differ by) and no time but the one given (the commit's).

/** The description of each development package package.json names; others are what needs them. */
const ROLES = {
  esbuild: 'bundles src/ into dist/proxy.js (scripts/build-bundle.mjs)',
  typescript: 'type-checks src/, test/ and scripts/ (npm test), and parses src/ and dist/proxy.js for their audits (scripts/audit-source.mjs, scripts/audit-bundle.mjs); emits nothing',
  tsx: 'runs the tests and the TypeScript scripts',
  '@types/node': "Node's API types for the type check",
};

/** 'node_modules/a/node_modules/@s/b' -> '@s/b'. */
const nameOf = (lockPath) => lockPath.slice(lockPath.lastIndexOf('node_modules/') + 'node_modules/'.length);

/** purl of an npm package: the scope's @ is percent-encoded (pkg:npm/%40types/node@20.19.43). */
const npmPurl = (name, version) => `pkg:npm/${name.replace(/^@/, '%40')}@${version}`;

/** A lockfile integrity ("sha512-<base64>") as a CycloneDX hash, or none for another algorithm. */
function lockHashes(integrity) {
  const m = /^sha512-([A-Za-z0-9+/=]+)$/.exec(integrity ?? '');
  return m ? [{ alg: 'SHA-512', content: Buffer.from(m[1], 'base64').toString('hex') }] : [];
}

/**
 * The components that built the file: every package of `lock` (package-lock.json, version 3)
 * whose path is in `installed`, in the lockfile's order, scope "excluded".
 */
function buildComponents(lock, installed) {
  const requiredBy = new Map();
  for (const [at, entry] of Object.entries(lock.packages)) {
    for (const dep of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      if (!requiredBy.has(dep)) requiredBy.set(dep, []);
      requiredBy.get(dep).push(at === '' ? 'credential-proxy' : nameOf(at));
    }
  }
  const seen = new Set();
  const components = [];
  for (const [at, entry] of Object.entries(lock.packages)) {
    if (at === '' || !installed.includes(at)) continue;
    const name = nameOf(at);
    const purl = npmPurl(name, entry.version);
    if (seen.has(purl)) continue; // the same version nested twice: one component (a bom-ref is unique)
    seen.add(purl);
    const slash = name.indexOf('/');
    const users = (requiredBy.get(name) ?? []).filter((u) => u !== 'credential-proxy');
    const hashes = lockHashes(entry.integrity);
    components.push({
      type: entry.bin ? 'application' : 'library',
      'bom-ref': purl,
      ...(name.startsWith('@') ? { group: name.slice(0, slash), name: name.slice(slash + 1) } : { name }),
      version: entry.version,
      description: ROLES[name] ?? `needed by ${users.join(', ') || 'the build'} (development only)`,
      scope: 'excluded',
      ...(hashes.length > 0 ? { hashes } : {}),
      ...(entry.license ? { licenses: [{ expression: entry.license }] } : {}),
      purl,
    });
  }
  return components;
}

/**
 * The SBOM of one release. `pkg`: package.json; `lock`: package-lock.json; `installed`: the
 * lockfile paths present in node_modules; `bundle`: { provenance, sha256, requires } as
 * buildBundle returns them; `file`: the file's name beside the SBOM; `node`: the version of the
 * node that built it; `timestamp`: an ISO 8601 time, or undefined for none.
 */
export function cycloneDx({ pkg, lock, installed, bundle, file, node, timestamp }) {
  const ref = `${pkg.name}@${pkg.version}`;
  const p = bundle.provenance;
  return {
    $schema: 'http://cyclonedx.org/schema/bom-1.6.schema.json',
    bomFormat: 'CycloneDX',
    specVersion: '1.6',
    version: 1,
    metadata: {
      ...(timestamp === undefined ? {} : { timestamp }),
      lifecycles: [{ phase: 'build' }],
      tools: {
        components: [{ type: 'application', name: 'node', version: node, description: 'ran the build (esbuild through its API, scripts/build-bundle.mjs) and wrote this SBOM (scripts/release.mjs)' }],
      },
      component: {
        type: 'application',
        'bom-ref': ref,
        name: pkg.name,
        version: pkg.version,
        description: pkg.description,
        licenses: [{ license: { id: pkg.license } }],
        hashes: [{ alg: 'SHA-256', content: bundle.sha256 }],
        properties: [
          { name: 'credential-proxy:file', value: file },
          { name: 'credential-proxy:source-commit', value: p.commit },
          { name: 'credential-proxy:sources-sha256', value: p.sourcesSha256 },
          { name: 'credential-proxy:lockfile-sha256', value: p.lockfileSha256 },
          { name: 'credential-proxy:runs-on', value: `node ${pkg.engines.node} (package.json engines), nothing else` },
          { name: 'credential-proxy:requires', value: bundle.requires.join(' ') },
        ],
      },
    },
    components: buildComponents(lock, installed),
    // The file depends on no component: an empty dependsOn says none, where a missing entry would
    // say unknown; the composition says the graph is complete.
    dependencies: [{ ref, dependsOn: [] }],
    compositions: [{ aggregate: 'complete', assemblies: [ref], dependencies: [ref] }],
  };
}

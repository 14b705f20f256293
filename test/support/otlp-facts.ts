// What an OpenTelemetry collector's OTLP/HTTP receiver checks of an export request, as a pure
// function of its body: the OTLP protobuf-JSON shape and the attribute names and types the proxy
// may use (test/fixtures/otlp/*.json, facts read from opentelemetry-proto and the semantic
// conventions). The receiver of the tests (test/support/otlp-receiver.ts) applies it to every
// request; test/unit/telemetry.test.ts to the exporter's bodies.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

interface Schema {
  readonly root: string;
  readonly messages: Readonly<Record<string, Readonly<Record<string, string>>>>;
  readonly enums: Readonly<Record<string, readonly number[]>>;
  readonly required: Readonly<Record<string, readonly string[]>>;
}
interface AttributeFacts {
  readonly conventions: Readonly<Record<string, { type: string; values?: string[]; custom?: string[] }>>;
  readonly own: Readonly<Record<string, { type: string; values?: string[] }>>;
  readonly resource: Readonly<Record<string, { type: string }>>;
  readonly events: readonly string[];
}

const FIXTURES = join(__dirname, '..', 'fixtures', 'otlp');
const SCHEMA = JSON.parse(readFileSync(join(FIXTURES, 'trace-schema.json'), 'utf8')) as Schema;
const ATTRIBUTES = JSON.parse(readFileSync(join(FIXTURES, 'genai-attributes.json'), 'utf8')) as AttributeFacts;

/** A span as the receiver keeps it: attributes as plain values (int64 strings made numbers). */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly start: bigint;
  readonly end: bigint;
  readonly attributes: Readonly<Record<string, string | number | boolean | readonly string[]>>;
  readonly events: readonly { readonly name: string; readonly time: bigint }[];
  readonly status: { readonly code: number; readonly message?: string };
  readonly resource: Readonly<Record<string, unknown>>;
}

const HEX = { trace_id: /^[0-9a-f]{32}$/, span_id: /^[0-9a-f]{16}$/ } as const;
const INT64 = /^-?\d+$/;

/** The problems of a value of protobuf type `type` at `path`, by the JSON mapping's rules. */
function check(value: unknown, type: string, path: string, out: string[]): void {
  const [head, rest] = type.startsWith('repeated ') ? ['repeated', type.slice(9)] : type.startsWith('oneof ') ? ['oneof', type.slice(6)] : type.startsWith('enum ') ? ['enum', type.slice(5)] : [type, ''];
  if (head === 'repeated') {
    if (!Array.isArray(value)) return void out.push(`${path}: not an array`);
    value.forEach((v, i) => check(v, rest, `${path}[${i}]`, out));
    return;
  }
  if (head === 'oneof') return check(value, rest, path, out);
  if (head === 'enum') {
    if (!Number.isInteger(value) || !SCHEMA.enums[rest]!.includes(value as number)) out.push(`${path}: ${JSON.stringify(value)} is not an integer of ${rest} (names are not allowed in OTLP JSON)`);
    return;
  }
  switch (head) {
    case 'string':
      if (typeof value !== 'string') out.push(`${path}: not a string`);
      return;
    case 'bool':
      if (typeof value !== 'boolean') out.push(`${path}: not a boolean`);
      return;
    case 'double':
      if (typeof value !== 'number' || !Number.isFinite(value)) out.push(`${path}: not a finite number`);
      return;
    case 'int64':
    case 'fixed64':
      if (typeof value !== 'string' || !INT64.test(value)) out.push(`${path}: ${JSON.stringify(value)} is not a decimal string (64-bit integers are strings in JSON)`);
      return;
    case 'uint32':
    case 'fixed32':
      if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > 0xffffffff) out.push(`${path}: not a 32-bit unsigned integer`);
      return;
    case 'trace_id':
    case 'span_id':
      if (typeof value !== 'string' || !HEX[head].test(value) || /^0+$/.test(value)) out.push(`${path}: ${JSON.stringify(value)} is not a ${head} (lowercase hex, not all zeros)`);
      return;
    case 'bytes':
      if (typeof value !== 'string') out.push(`${path}: not a base64 string`);
      return;
  }
  const fields = SCHEMA.messages[head];
  if (fields === undefined) return void out.push(`${path}: unknown type ${head}`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return void out.push(`${path}: not an object (${head})`);
  const entries = Object.entries(value);
  for (const [k, v] of entries) {
    if (fields[k] === undefined) out.push(`${path}.${k}: no such field in ${head}`);
    else check(v, fields[k]!, `${path}.${k}`, out);
  }
  for (const k of SCHEMA.required[head] ?? []) if (!(k in value)) out.push(`${path}: ${head} without ${k}`);
  const oneofs = entries.filter(([k]) => fields[k]?.startsWith('oneof '));
  if (Object.values(fields).some((t) => t.startsWith('oneof ')) && oneofs.length !== 1) out.push(`${path}: ${head} holds ${oneofs.length} of its oneof fields, not one`);
}

type AnyValue = { stringValue?: string; intValue?: string; doubleValue?: number; boolValue?: boolean; arrayValue?: { values: AnyValue[] } };

function plain(v: AnyValue): string | number | boolean | readonly string[] {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return (v.arrayValue?.values ?? []).map((x) => String(x.stringValue));
}

function typeOf(v: AnyValue): string {
  if (v.stringValue !== undefined) return 'string';
  if (v.intValue !== undefined) return 'int';
  if (v.doubleValue !== undefined) return 'double';
  if (v.boolValue !== undefined) return 'boolean';
  return (v.arrayValue?.values ?? []).every((x) => x.stringValue !== undefined) ? 'string[]' : 'array';
}

/** The problems of one span's attributes against the names and types the conventions (and ours) allow. */
function checkAttributes(list: readonly { key: string; value: AnyValue }[], allowed: AttributeFacts['conventions'], path: string, out: string[]): Record<string, string | number | boolean | readonly string[]> {
  const values: Record<string, string | number | boolean | readonly string[]> = {};
  for (const { key, value } of list) {
    const fact = allowed[key];
    if (key in values) out.push(`${path}: ${key} twice`);
    if (fact === undefined) out.push(`${path}: ${key} is not an attribute the conventions (or docs/operations.md) name`);
    else if (typeOf(value) !== fact.type) out.push(`${path}: ${key} is ${typeOf(value)}, the conventions say ${fact.type}`);
    else if (fact.values !== undefined && ![...fact.values, ...(fact.custom ?? [])].includes(String(plain(value)))) out.push(`${path}: ${key}=${JSON.stringify(plain(value))} is not one of its values`);
    values[key] = plain(value);
  }
  return values;
}

/** Pure: the problems of one export request's body, and the spans it holds. */
export function validateExport(body: string): { problems: string[]; spans: ReceivedSpan[] } {
  const problems: string[] = [];
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch {
    return { problems: ['the body is not JSON'], spans: [] };
  }
  check(doc, SCHEMA.root, '$', problems);
  const spans: ReceivedSpan[] = [];
  if (problems.length > 0) return { problems, spans };
  const spanAttributes = { ...ATTRIBUTES.conventions, ...ATTRIBUTES.own };
  for (const [r, rs] of ((doc as { resourceSpans: { resource?: { attributes?: [] }; scopeSpans: { spans: Record<string, never>[] }[] }[] }).resourceSpans).entries()) {
    const resource = checkAttributes(rs.resource?.attributes ?? [], { ...ATTRIBUTES.resource, ...Object.fromEntries((rs.resource?.attributes ?? []).map((a: { key: string }) => [a.key, { type: 'string' }])) }, `resource ${r}`, problems);
    if (resource['service.name'] === undefined) problems.push(`resource ${r}: no service.name`);
    for (const ss of rs.scopeSpans) {
      for (const s of ss.spans as unknown as { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; startTimeUnixNano: string; endTimeUnixNano: string; attributes?: { key: string; value: AnyValue }[]; events?: { name: string; timeUnixNano: string }[]; status?: { code: number; message?: string } }[]) {
        const at = `span ${s.name}`;
        if (BigInt(s.endTimeUnixNano) < BigInt(s.startTimeUnixNano)) problems.push(`${at}: ends before it starts`);
        for (const e of s.events ?? []) if (!ATTRIBUTES.events.includes(e.name)) problems.push(`${at}: event ${e.name} is not one docs/operations.md names`);
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId,
          name: s.name,
          kind: s.kind,
          start: BigInt(s.startTimeUnixNano),
          end: BigInt(s.endTimeUnixNano),
          attributes: checkAttributes(s.attributes ?? [], spanAttributes, at, problems),
          events: (s.events ?? []).map((e) => ({ name: e.name, time: BigInt(e.timeUnixNano) })),
          status: s.status ?? { code: 0 },
          resource,
        });
      }
    }
  }
  return { problems, spans };
}

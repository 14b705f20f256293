// Tools the provider runs on its own side ("hosted" or "server" tools), for every protocol. Each
// is a path out of the sandbox that no network policy sees: web search and web fetch reach the
// web, file search and the code interpreter read the organisation's stored files and
// containers, image generation spends on another model, a provider-run shell or code execution
// runs commands in the provider's containers, tool search runs over the organisation's deferred
// tools, and MCP makes the provider connect to any server URL with headers the request chooses.
// A request may use one only when the operator names it in --allow-hosted-tools.
import { bounded } from '../../http/log.ts';
import { ERRORS } from '../../http/errors.ts';
import { isObject, type JsonObject } from '../../json/keys.ts';
import { refuse, type RequestRefusal } from './protocol.ts';

// url_content is no tool, but the same egress: content (images, documents, files) the provider
// fetches from a URL the request names (./content.ts).
const HOSTED_TOOL_NAMES = ['web_search', 'web_fetch', 'file_search', 'code_interpreter', 'code_execution', 'image_generation', 'mcp', 'shell', 'tool_search', 'url_content'] as const;
export type HostedTool = (typeof HOSTED_TOOL_NAMES)[number];

/** The set of allowed hosted tools from --allow-hosted-tools; an unknown name is an error naming the flag. */
export function hostedToolsPolicy(names: readonly string[]): ReadonlySet<string> {
  for (const name of names) {
    if (!(HOSTED_TOOL_NAMES as readonly string[]).includes(name)) throw new Error(`--allow-hosted-tools: "${bounded(name)}" is not a hosted tool; use any of ${HOSTED_TOOL_NAMES.join(', ')}`);
  }
  return new Set(names);
}

/** The refusal of a hosted tool the operator did not allow: names the type and the flag. */
export function refuseHostedTool(type: string, name: HostedTool, param: string): RequestRefusal {
  return refuse(ERRORS.toolNotAllowed, param, `tool type "${bounded(type)}" runs on the provider's side, outside the sandbox, and is not allowed through this gateway; the operator can allow it with --allow-hosted-tools ${name}`);
}

/** The refusal of a tool type the gateway does not know (fail closed: it may be a hosted one). */
export function refuseUnknownTool(type: string, param: string, clientTypes: string): RequestRefusal {
  return refuse(ERRORS.toolNotAllowed, param, `tool type "${bounded(type)}" is not known to this gateway and is refused; tools the client runs itself (${clientTypes}) are allowed`);
}

/**
 * `tools`, when present, is an array of objects, each passing the protocol's `checkOne` (given
 * the tool and its index, for a `tools[i]` param). The first refusal is the answer.
 */
export function checkToolList(tools: unknown, checkOne: (tool: JsonObject, i: number) => RequestRefusal | undefined): RequestRefusal | undefined {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) return refuse(ERRORS.invalidTools, 'tools');
  for (let i = 0; i < tools.length; i++) {
    const tool: unknown = tools[i];
    if (!isObject(tool)) return refuse(ERRORS.invalidTools, `tools[${i}]`);
    const refusal = checkOne(tool, i);
    if (refusal) return refusal;
  }
  return undefined;
}

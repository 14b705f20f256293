// What a request's content may point at, the same for every protocol: nothing stored at the
// provider, and (unless the operator allows it) no address the provider would fetch.
//
// - Stored state. Every workload shares the provider key, and whatever is stored under it (files
//   uploaded through the Files API, another run's code-execution container, custom skills,
//   prompts, responses, audio of an earlier answer) is readable by whoever names it. A request
//   may use only what it sends itself: a reference by id is refused, with one error code on every
//   protocol, and the message says what to send instead.
// - Content by address. An image, document or file given as a URL is fetched by the provider,
//   from an address the workload chose, outside every network policy: the same egress as
//   web_fetch, so it is refused unless `--allow-hosted-tools url_content`. Inline content (a
//   `data:` URL, base64, text) is always allowed.
//
// The walk covers every object under the content fields (messages, input, system), at any depth:
// a document whose content holds a nested source, a tool result holding an image. It skips what
// the model wrote as a client tool's arguments (`tool_use.input`), which no provider reads as
// content.
import { bounded } from '../../http/log.ts';
import { ERRORS } from '../../http/errors.ts';
import { isObject, type JsonObject } from '../../json/keys.ts';
import { refuse, type RequestRefusal } from './protocol.ts';

/** The --allow-hosted-tools name that lets content be given by URL. */
const URL_CONTENT = 'url_content';

type Finding = { readonly kind: 'stored' | 'url'; readonly path: string; readonly what: string };

/** Blocks whose fields are the model's arguments to a client tool, not content. */
export const ARGUMENT_BLOCKS: ReadonlySet<string> = new Set(['tool_use', 'server_tool_use']);

const isInline = (url: unknown): boolean => typeof url === 'string' && /^data:/i.test(url);

/** Pure: what one object of the content is, by its own fields (not its children). */
function findingOf(o: JsonObject, path: string): Finding | undefined {
  if (o.file_id !== undefined && o.file_id !== null) return { kind: 'stored', path: `${path}.file_id`, what: 'a file stored at the provider ("file_id")' };
  if (o.file_ids !== undefined && o.file_ids !== null) return { kind: 'stored', path: `${path}.file_ids`, what: 'files stored at the provider ("file_ids")' };
  if (o.type === 'container_upload') return { kind: 'stored', path, what: 'a file uploaded into a provider container ("container_upload")' };
  if (o.type === 'item_reference') return { kind: 'stored', path, what: 'an item stored at the provider ("item_reference")' };
  const audio = o.audio;
  if (isObject(audio) && audio.id !== undefined && audio.id !== null) return { kind: 'stored', path: `${path}.audio.id`, what: 'audio of an earlier answer stored at the provider ("audio.id")' };
  if (o.image_url !== undefined && o.image_url !== null) {
    const url = typeof o.image_url === 'string' ? o.image_url : isObject(o.image_url) ? o.image_url.url : undefined;
    if (!isInline(url)) return { kind: 'url', path: `${path}.image_url`, what: 'an image URL' };
  }
  if (o.file_url !== undefined && o.file_url !== null) return { kind: 'url', path: `${path}.file_url`, what: 'a file URL' };
  if (o.type === 'url' && o.url !== undefined) return { kind: 'url', path, what: 'a source of type "url"' };
  return undefined;
}

/**
 * Pure: the first reference in `value` (a content field, found at `path`) to stored state, or
 * to content by URL unless `urlsAllowed`, depth first.
 */
function findContentReference(value: unknown, path: string, urlsAllowed: boolean): Finding | undefined {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findContentReference(value[i], `${path}[${i}]`, urlsAllowed);
      if (found) return found;
    }
    return undefined;
  }
  if (!isObject(value)) return undefined;
  if (typeof value.type === 'string' && ARGUMENT_BLOCKS.has(value.type)) return undefined;
  const own = findingOf(value, path);
  if (own && (own.kind === 'stored' || !urlsAllowed)) return own;
  for (const key of Object.keys(value)) {
    const child = value[key];
    if (typeof child !== 'object' || child === null) continue;
    const found = findContentReference(child, `${path}.${key}`, urlsAllowed);
    if (found) return found;
  }
  return undefined;
}

/** The refusal of a stored-state reference: one error code on every protocol, saying what to send instead. */
export function refuseStoredState(param: string, what: string, instead: string): RequestRefusal {
  return refuse(ERRORS.storedStateRefused, param, `${bounded(param)} refers to ${what}, which this gateway does not let a workload reach (every workload shares the provider key); ${instead}`);
}

const SEND_INLINE = 'send the content inline instead (text, base64 or a data: URL)';

/** Pure: the refusal for the content fields of a request (name → value), or undefined. */
export function checkContent(fields: readonly (readonly [string, unknown])[], hostedTools: ReadonlySet<string>): RequestRefusal | undefined {
  const urlsAllowed = hostedTools.has(URL_CONTENT);
  for (const [name, value] of fields) {
    const found = findContentReference(value, name, urlsAllowed);
    if (found === undefined) continue;
    if (found.kind === 'stored') return refuseStoredState(found.path, found.what, SEND_INLINE);
    return refuse(
      ERRORS.urlContentNotAllowed,
      found.path,
      `${bounded(found.path)} is content the provider would fetch from an address the request names (${found.what}), outside every network policy; send it inline (a data: URL or base64), or the operator can allow it with --allow-hosted-tools ${URL_CONTENT}`,
    );
  }
  return undefined;
}

/** Pure: `"store": true` asks the provider to keep the exchange where anyone holding the key can read it. */
export function checkStore(store: unknown): RequestRefusal | undefined {
  if (store !== true) return undefined;
  return refuseStoredState('store', 'storage at the provider ("store": true keeps this exchange readable by anyone holding the organisation\'s key)', 'send "store": false or leave it out');
}

// Anthropic's Messages API as the clouds serve it, passed through unchanged: Vertex AI's
// publisher routes (`.../models/{model}:rawPredict` and `:streamRawPredict`, an SSE stream) and
// the Bedrock runtime (`/model/{model}/invoke` and `/invoke-with-response-stream`, an AWS event
// stream). The body is the Messages body without `model` (the model is in the path) and with
// `anthropic_version`; the body checks are the Messages route's. Paths are parsed strictly, to
// one canonical form: the model id's characters are stated, nothing is percent-encoded but a
// Bedrock id's `:` (as %3A), and the upstream path is built from the provider's configuration.
import { anthropicMessages } from './anthropic-messages.ts';
import type { CloudScope, PathModel, WireProtocol } from './protocol.ts';

/** A model id in a path: letters, digits, `.`, `-`, `_`, `@` (Vertex versions), `:` (Bedrock versions); at most 128. */
const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$/;
const VERTEX = /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/anthropic\/models\/([^/]+):(rawPredict|streamRawPredict)$/;
const GCP_PROJECT = /^[a-z][a-z0-9-]{4,28}[a-z0-9]$/;
const GCP_REGION = /^(?:[a-z]+-[a-z]+\d{1,2}|global)$/;
const BEDROCK = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream)$/;

/** Pure: a Vertex publisher path, or undefined when it is none, or the reason it is refused. */
export function parseVertexPath(path: string): PathModel | { readonly error: string } | undefined {
  if (!path.startsWith('/v1/projects/')) return undefined;
  const m = VERTEX.exec(path);
  if (!m) return path.includes('/publishers/anthropic/models/') ? { error: 'not a Vertex AI Anthropic route this gateway serves (…/models/{model}:rawPredict or :streamRawPredict)' } : undefined;
  const [, project, region, model, action] = m as unknown as [string, string, string, string, string];
  // The token count names no model in its path: the body's is checked (and no usage recorded).
  if (model === 'count-tokens' && action === 'rawPredict') {
    if (!GCP_PROJECT.test(project) || !GCP_REGION.test(region)) return { error: 'the project or region in the path is not in its canonical form' };
    return { model: '', action, project, region, countTokens: true };
  }
  if (!GCP_PROJECT.test(project) || !GCP_REGION.test(region) || !MODEL_ID.test(model) || model.includes(':')) return { error: 'the project, region or model in the path is not in its canonical form' };
  return { model, action, project, region };
}

/** Pure: a Bedrock runtime path; the model id's `:` may come as %3A (the SDKs encode it), nothing else encoded. */
export function parseBedrockPath(path: string): PathModel | { readonly error: string } | undefined {
  if (!path.startsWith('/model/')) return undefined;
  const m = BEDROCK.exec(path);
  if (!m) return { error: 'not a Bedrock runtime route this gateway serves (/model/{model}/invoke or /invoke-with-response-stream)' };
  const model = m[1]!.replace(/%3A/gi, ':');
  if (model.includes('%') || !MODEL_ID.test(model)) return { error: 'the model id in the path is not in its canonical form (letters, digits, . - _ @, and : as %3A)' };
  return { model, action: m[2]! };
}

export const vertexMessages: WireProtocol = {
  ...anthropicMessages,
  kind: 'anthropic-vertex',
  routes: [
    {
      path: '/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict|:streamRawPredict',
      upstreamPath: '',
      modelInPath: parseVertexPath,
      upstreamPathFor: (scope: CloudScope, m: PathModel) => `/v1/projects/${scope.project}/locations/${scope.region}/publishers/anthropic/models/${m.countTokens ? 'count-tokens' : m.model}:${m.action}`,
    },
  ],
};

export const bedrockMessages: WireProtocol = {
  ...anthropicMessages,
  kind: 'anthropic-bedrock',
  routes: [
    {
      path: '/model/{model}/invoke|/invoke-with-response-stream',
      upstreamPath: '',
      modelInPath: parseBedrockPath,
      upstreamPathFor: (_scope: CloudScope, m: PathModel) => `/model/${encodeURIComponent(m.model)}/${m.action}`,
    },
  ],
  // Bedrock's stream is binary event-stream frames; their end is the stream's end.
  streamFraming: 'aws-eventstream',
  upstreamRequestIdHeader: 'x-amzn-requestid',
};

// What the fake upstreams answer when a real coding agent talks to them (npm run e2e:agents).
// The three wire protocols differ, the script of a conversation does not:
//
//   - the last input is a tool result        -> final text that quotes the tool output;
//   - the last user message asks for a tool  -> a call of the shell tool the agent offered;
//   - anything else (a plain prompt, a title
//     or summary request the agent makes)    -> plain text.
//
// The fakes decide from the request alone, so an agent can retry, reconnect or add side
// requests without a scripted queue going out of step.

/** Put this in the prompt to get a tool call back. */
export const TOOL_TURN_MARKER = 'e2e tool turn';
/** The command the fake asks the agent to run; its output must come back upstream. */
export const TOOL_COMMAND = 'echo e2e-tool-ok';
export const TOOL_OUTPUT = 'e2e-tool-ok';
/** The plain answer; the e2e run looks for it in the agent's output. */
export const PLAIN_ANSWER = 'E2E-PLAIN-ANSWER: hello from the fake upstream.';
/** The final answer after a tool result; quotes the tool output when it was there. */
export function finalAnswer(toolResult: string): string {
  return toolResult.includes(TOOL_OUTPUT) ? `E2E-TOOL-DONE: the command printed ${TOOL_OUTPUT}.` : 'E2E-TOOL-MISSING: the tool result did not contain the expected output.';
}

export type Turn = { kind: 'plain' } | { kind: 'final'; toolResult: string } | { kind: 'tool'; tool: ShellTool };

/** A tool the agent offered that runs a shell command, and how to fill in its arguments. */
export interface ShellTool {
  name: string;
  /** The arguments object for TOOL_COMMAND, shaped by the tool's JSON schema. */
  arguments: Record<string, unknown>;
}

/** Names of the shell tools of the agents we run (Codex, opencode, Claude Code), most specific first. */
const SHELL_TOOL_NAMES = ['exec_command', 'shell_command', 'shell', 'bash', 'Bash'];

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
}

/**
 * Picks the shell tool from (name, parameters schema) pairs and fills its arguments from the
 * schema: the command property gets TOOL_COMMAND (as argv when it is an array, as Codex's
 * `shell` tool wants), a required `description` gets a short text; other required properties
 * make the tool unusable (we would be guessing).
 */
export function pickShellTool(tools: readonly { name: string; schema: unknown }[]): ShellTool | undefined {
  for (const wanted of SHELL_TOOL_NAMES) {
    const tool = tools.find((t) => t.name === wanted);
    if (!tool) continue;
    const schema = (tool.schema ?? {}) as JsonSchema;
    const props = schema.properties ?? {};
    const args: Record<string, unknown> = {};
    const commandKey = ['command', 'cmd'].find((k) => k in props);
    if (!commandKey) continue;
    const commandType = props[commandKey]!.type;
    args[commandKey] = commandType === 'array' || (Array.isArray(commandType) && commandType.includes('array')) ? ['bash', '-lc', TOOL_COMMAND] : TOOL_COMMAND;
    for (const key of schema.required ?? []) {
      if (key in args) continue;
      if (key === 'description') args[key] = 'Print the e2e marker';
      else return undefined;
    }
    return { name: tool.name, arguments: args };
  }
  return undefined;
}

/** The turn for a request whose last user text and last tool result were extracted by the protocol. */
export function decideTurn(input: { lastIsToolResult: boolean; toolResult: string; lastUserText: string; tools: readonly { name: string; schema: unknown }[] }): Turn {
  if (input.lastIsToolResult) return { kind: 'final', toolResult: input.toolResult };
  if (input.lastUserText.includes(TOOL_TURN_MARKER)) {
    const tool = pickShellTool(input.tools);
    if (tool) return { kind: 'tool', tool };
  }
  return { kind: 'plain' };
}

/** Text of a content value in any of the three protocols: a string, or parts with `text`. */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p === 'string' ? p : textOf((p as { text?: unknown; content?: unknown })?.text ?? (p as { content?: unknown })?.content))).join('\n');
  return '';
}

/** Splits text into a few stream deltas, as a model would emit it. */
export function deltas(text: string, size = 12): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

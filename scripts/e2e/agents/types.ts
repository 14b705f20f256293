// What the e2e run needs to know about one coding agent: how to install it, which wire protocol
// it speaks, the configuration it gets, and how to run one headless turn.
import type { Pinned } from '../install.ts';

export type AgentName = 'codex' | 'opencode' | 'claude-code';
export type Protocol = 'responses' | 'chat-completions' | 'messages';

/** A fresh directory tree per run: the agent's HOME and the directory it works in. */
export interface Sandbox {
  root: string;
  home: string;
  work: string;
}

/** How to run the agent's executable (the installed bin) for one prompt. */
export interface AgentCommand {
  args: string[];
  /**
   * The agent's own variables. The harness adds PATH (the system's), HOME (the sandbox's) and
   * MODEL_PROXY_TOKEN (the bot token), and nothing else of ours (no proxy variables, no real keys).
   */
  env: Record<string, string>;
}

export interface AgentSpec extends Pinned {
  name: AgentName;
  protocol: Protocol;
  /** The provider kind of the gateway (issue 10) that serves its protocol. */
  providerKind: 'openai' | 'anthropic';
  /** The model it is configured with (the gateway must allow it). */
  model: string;
  /**
   * The configuration file this harness writes in --direct mode, pointing at `origin`
   * (http://127.0.0.1:PORT). It is also what `proxy.js agent-config --agent <name>` should
   * print for a gateway at that address.
   */
  referenceConfig(origin: string): string;
  /** A problem with a generated configuration (agent-config output), or undefined. */
  checkConfig(text: string): string | undefined;
  /** Writes the configuration into the sandbox and says how to run one prompt. */
  prepare(sandbox: Sandbox, config: string, prompt: string): AgentCommand;
  /** Installs what the agent would otherwise fetch at run time (idempotent). */
  prefetch?(log: (line: string) => void): void;
}

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

/**
 * An agent's configuration as the harness got it: the text `proxy.js agent-config` printed (or the
 * reference), and for an agent configured by a directory (AgentSpec.configDir) that directory.
 */
export interface AgentConfig {
  text: string;
  /** What `agent-config --config-dir` wrote (or the reference's files); prepare copies it into the sandbox. */
  dir?: string;
}

export interface AgentSpec extends Pinned {
  name: AgentName;
  protocol: Protocol;
  /** The provider kind of the gateway (issue 10) that serves its protocol. */
  providerKind: 'openai' | 'anthropic';
  /** The model it is configured with (the gateway must allow it). */
  model: string;
  /**
   * Configured by a directory: `agent-config --config-dir DIR` writes the agent's files into DIR
   * and prints the environment it needs (opencode). The harness has agent-config write into a
   * fresh directory named this, and the reference writes the same there.
   */
  configDir?: string;
  /**
   * The configuration this harness gives in --direct mode, pointing at `origin`
   * (http://127.0.0.1:PORT). It is also what `proxy.js agent-config --agent <name>` should
   * print for a gateway at that address; for an agent with configDir, what it prints with
   * `--config-dir dir`, the files it writes there written too.
   */
  referenceConfig(origin: string, dir: string): string;
  /** A problem with a generated configuration (agent-config output, and the directory it wrote), or undefined. */
  checkConfig(config: AgentConfig): string | undefined;
  /** Writes the configuration into the sandbox and says how to run one prompt. */
  prepare(sandbox: Sandbox, config: AgentConfig, prompt: string): AgentCommand;
}

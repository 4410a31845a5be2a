/**
 * rl-training-headers: tells an OpenClaw-RL server which session each model call belongs to and
 * whether it is the agent's own turn (main) or a utility call (side), so the server's RL intercept
 * does not have to infer either.
 *
 * Mechanism (openclaw 2026.9.6): the plugin registers the provider id of the server's config snippet
 * (`openclaw-rl`) with only a `wrapStreamFn` hook. The runtime looks up that hook for the model's
 * provider (`applyExtraParamsToAgent` in dist/extra-params-*.mjs) and uses the returned stream function
 * for every call of that provider: the agent loop's turns, whose stream options carry the session's
 * `sessionId`, and utility completions (compaction summaries), whose options carry none.
 *
 *   agent-loop call -> X-Session-Id: <sessionId>
 *   utility call    -> X-Turn-Type: side   (no session id is known there; the server places it)
 *
 * Agent-loop calls get no `X-Turn-Type: main`: an explicit turn type overrides the server's own
 * recognition of OpenClaw's pre-compaction memory flush, which is an agent-loop call of the same
 * session and must stay side. The server classifies those calls main unless they are that flush.
 */

// The few shapes used here, from the plugin SDK's contract (openclaw/plugin-sdk): kept local so the
// package builds from the npm registry without the whole CLI.
type Headers = Record<string, string>;
interface StreamOptions {
  sessionId?: string;
  headers?: Headers;
  [key: string]: unknown;
}
type StreamFn = (model: unknown, context: unknown, options?: StreamOptions) => unknown;
interface WrapStreamContext {
  provider: string;
  streamFn?: StreamFn;
}
interface ProviderPlugin {
  id: string;
  label: string;
  wrapStreamFn: (ctx: WrapStreamContext) => StreamFn | undefined;
}
interface PluginApi {
  registerProvider(provider: ProviderPlugin): void;
}

export const PROVIDER_ID = "openclaw-rl";

export function turnHeaders(options: StreamOptions | undefined): Headers {
  const sessionId = options?.sessionId;
  // An empty X-Session-Id would be a different (invalid) session: send it only when known.
  return sessionId ? { "X-Session-Id": sessionId } : { "X-Turn-Type": "side" };
}

export function wrapStreamFn(ctx: WrapStreamContext): StreamFn | undefined {
  const inner = ctx.streamFn;
  if (!inner) return undefined;
  return (model, context, options) =>
    inner(model, context, { ...options, headers: { ...options?.headers, ...turnHeaders(options) } });
}

export default {
  id: "rl-training-headers",
  name: "RL training headers",
  description: "X-Session-Id / X-Turn-Type on the agent's calls to an OpenClaw-RL server",
  register(api: PluginApi): void {
    api.registerProvider({ id: PROVIDER_ID, label: "OpenClaw-RL", wrapStreamFn });
  },
};

/**
 * OpenAI chat wire objects from output pieces: `chat.completion` for a whole response, and the
 * `chat.completion.chunk` sequence for a stream. Both are built from the same pieces, so streamed deltas
 * assemble to the non-streamed message (tested with synthetic pieces through the SDK's own accumulator).
 * @module
 */
import { assembleCalls, type ToolPiece } from "./tools.ts";

export interface ChatMeta {
  id: string;
  created: number;
  model: string;
  includeUsage: boolean;
  /** Ids for tool calls (random in the server; fixed in tests). */
  callId: () => string;
}

/** What the end of a generation contributes (a subset of GenerationResult). */
export interface Finish {
  finishReason: string;
  promptTokens: number;
  /** Prompt tokens whose KV came from the prefix cache (absent: none). */
  cachedTokens?: number;
  completionTokens: number;
  stopSequence: string | null;
}

export function usage(r: Finish) {
  return {
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    total_tokens: r.promptTokens + r.completionTokens,
    prompt_tokens_details: { cached_tokens: r.cachedTokens ?? 0 },
  };
}

export function finishReason(r: Finish, calls: number): string {
  if (r.finishReason === "length") return "length";
  return calls ? "tool_calls" : "stop";
}

/** The non-streamed `chat.completion`. */
export function chatCompletion(meta: ChatMeta, pieces: ToolPiece[], r: Finish): Record<string, unknown> {
  let text = "";
  const tool_calls = [];
  for (const p of assembleCalls(pieces)) {
    if (p.type === "text") text += p.text;
    else {
      tool_calls.push({
        id: meta.callId(),
        type: "function",
        function: { name: p.call.name, arguments: p.call.arguments },
      });
    }
  }
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    system_fingerprint: "flint",
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: tool_calls.length && !text ? null : text,
        ...(tool_calls.length ? { tool_calls } : {}),
      },
      logprobs: null,
      finish_reason: finishReason(r, tool_calls.length),
    }],
    usage: usage(r),
  };
}

/** The `chat.completion.chunk` objects of a stream, piece by piece. */
export class ChatChunker {
  #calls = 0;
  constructor(readonly meta: ChatMeta) {}

  #chunk(delta: Record<string, unknown>, finish: string | null): Record<string, unknown> {
    const m = this.meta;
    return {
      id: m.id,
      object: "chat.completion.chunk",
      created: m.created,
      model: m.model,
      system_fingerprint: "flint",
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(m.includeUsage ? { usage: null } : {}),
    };
  }

  start(): Record<string, unknown>[] {
    return [this.#chunk({ role: "assistant", content: "" }, null)];
  }

  /** A call starts with its id and name; its arguments follow as deltas while the model writes them. */
  piece(p: ToolPiece): Record<string, unknown>[] {
    if (p.type === "text") return [this.#chunk({ content: p.text }, null)];
    if (p.type === "call_start") {
      const index = this.#calls++;
      const call = {
        index,
        id: this.meta.callId(),
        type: "function",
        function: { name: p.name, arguments: "" },
      };
      return [this.#chunk({ tool_calls: [call] }, null)];
    }
    if (p.type === "call_args") {
      return [
        this.#chunk({ tool_calls: [{ index: this.#calls - 1, function: { arguments: p.delta } }] }, null),
      ];
    }
    return [];
  }

  end(r: Finish): Record<string, unknown>[] {
    const m = this.meta;
    const out = [this.#chunk({}, finishReason(r, this.#calls))];
    if (m.includeUsage) {
      out.push({
        id: m.id,
        object: "chat.completion.chunk",
        created: m.created,
        model: m.model,
        system_fingerprint: "flint",
        choices: [],
        usage: usage(r),
      });
    }
    return out;
  }
}

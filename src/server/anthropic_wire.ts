/**
 * Anthropic Messages wire objects from output pieces: the whole `message`, and the stream's event sequence
 * (message_start, content_block_start/delta/stop per block, message_delta with stop_reason and usage,
 * message_stop). Both come from the same pieces, so a stream assembles to the non-streamed message.
 * @module
 */
import { closeJson } from "./json_scan.ts";
import type { Finish } from "./openai_wire.ts";
import type { NamedEvent } from "./sse.ts";
import { assembleCalls, type ToolPiece } from "./tools.ts";

export interface MessageMeta {
  id: string;
  model: string;
  /** Ids for tool_use blocks (random in the server; fixed in tests). */
  callId: () => string;
}

type Block = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

export function stopReason(r: Finish, calls: number): { stop_reason: string; stop_sequence: string | null } {
  if (r.finishReason === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (calls) return { stop_reason: "tool_use", stop_sequence: null };
  if (r.stopSequence !== null) return { stop_reason: "stop_sequence", stop_sequence: r.stopSequence };
  return { stop_reason: "end_turn", stop_sequence: null };
}

/** Anthropic counts only the prompt tokens not read from the cache as input_tokens. */
function usage(prompt: number, output: number, cached = 0) {
  return {
    input_tokens: prompt - cached,
    output_tokens: output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  };
}

/**
 * A tool_use block's input: the arguments' object; arguments cut short are closed as the SDK's partial
 * JSON parser reads a stream (json_scan.ts), and {} when nothing of them holds together.
 */
export function callInput(args: string): Record<string, unknown> {
  const v = closeJson(args);
  return v && typeof v === "object" && !Array.isArray(v) ? v as Record<string, unknown> : {};
}

/** The non-streamed message. Text pieces between calls merge into one text block. */
export function messageBody(meta: MessageMeta, pieces: ToolPiece[], r: Finish): Record<string, unknown> {
  const content: Block[] = [];
  let calls = 0;
  for (const p of assembleCalls(pieces)) {
    const last = content[content.length - 1];
    if (p.type === "call") {
      calls++;
      content.push({
        type: "tool_use",
        id: meta.callId(),
        name: p.call.name,
        input: callInput(p.call.arguments),
      });
    } else if (last?.type === "text") last.text += p.text;
    else content.push({ type: "text", text: p.text });
  }
  return {
    id: meta.id,
    type: "message",
    role: "assistant",
    model: meta.model,
    content,
    ...stopReason(r, calls),
    usage: usage(r.promptTokens, r.completionTokens, r.cachedTokens),
  };
}

/**
 * The stream's events, piece by piece. A text block stays open across text pieces; a call is one block
 * whose input arrives as input_json_delta events while the model writes it.
 */
export class MessageEvents {
  #index = -1;
  #textOpen = false;
  #calls = 0;
  constructor(readonly meta: MessageMeta) {}

  start(promptTokens: number): NamedEvent[] {
    const m = this.meta;
    return [["message_start", {
      type: "message_start",
      message: {
        id: m.id,
        type: "message",
        role: "assistant",
        model: m.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: usage(promptTokens, 0),
      },
    }]];
  }

  #closeText(out: NamedEvent[]): void {
    if (this.#textOpen) out.push(["content_block_stop", { type: "content_block_stop", index: this.#index }]);
    this.#textOpen = false;
  }

  piece(p: ToolPiece): NamedEvent[] {
    const out: NamedEvent[] = [];
    if (p.type === "text") {
      if (!this.#textOpen) {
        this.#textOpen = true;
        out.push(["content_block_start", {
          type: "content_block_start",
          index: ++this.#index,
          content_block: { type: "text", text: "" },
        }]);
      }
      out.push(["content_block_delta", {
        type: "content_block_delta",
        index: this.#index,
        delta: { type: "text_delta", text: p.text },
      }]);
      return out;
    }
    if (p.type === "call_start") {
      this.#closeText(out);
      this.#calls++;
      out.push(["content_block_start", {
        type: "content_block_start",
        index: ++this.#index,
        content_block: { type: "tool_use", id: this.meta.callId(), name: p.name, input: {} },
      }]);
    } else if (p.type === "call_args") {
      out.push(["content_block_delta", {
        type: "content_block_delta",
        index: this.#index,
        delta: { type: "input_json_delta", partial_json: p.delta },
      }]);
    } else out.push(["content_block_stop", { type: "content_block_stop", index: this.#index }]);
    return out;
  }

  end(r: Finish): NamedEvent[] {
    const out: NamedEvent[] = [];
    this.#closeText(out);
    out.push(
      ["message_delta", {
        type: "message_delta",
        delta: stopReason(r, this.#calls),
        // message_start went out before the cache was consulted: the final split is given here.
        usage: usage(r.promptTokens, r.completionTokens, r.cachedTokens),
      }],
      ["message_stop", { type: "message_stop" }],
    );
    return out;
  }
}

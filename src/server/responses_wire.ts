/**
 * OpenAI Responses wire objects from output pieces: the `response` object, and the stream's events
 * (response.created, response.in_progress, response.output_item.added, content_part.added,
 * output_text.delta, function_call_arguments.delta, the matching .done events, response.completed or
 * response.incomplete). Both come from the same pieces, so a stream assembles to the non-streamed response.
 * @module
 */
import type { Finish } from "./openai_wire.ts";
import type { NamedEvent } from "./sse.ts";
import { assembleCalls, type ToolPiece } from "./tools.ts";

export interface ResponseMeta {
  id: string;
  createdAt: number;
  model: string;
  /** Request fields the response echoes (instructions, tools, tool_choice, …). */
  echo: Record<string, unknown>;
  customTools: Set<string>;
  /** Ids for output items and calls (random in the server; fixed in tests). */
  itemId: (prefix: string) => string;
}

type Item = Record<string, unknown>;

export function responseUsage(r: Pick<Finish, "promptTokens" | "cachedTokens" | "completionTokens">) {
  return {
    input_tokens: r.promptTokens,
    input_tokens_details: { cached_tokens: r.cachedTokens ?? 0 },
    output_tokens: r.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: r.promptTokens + r.completionTokens,
  };
}

function messageItem(id: string, text: string, status: string): Item {
  return {
    type: "message",
    id,
    status,
    role: "assistant",
    content: status === "in_progress" ? [] : [{ type: "output_text", text, annotations: [], logprobs: [] }],
  };
}

/** A call as its output item: custom (freeform) tools take their `input` back out of the arguments. */
function callItem(
  meta: ResponseMeta,
  id: string,
  callId: string,
  name: string,
  args: string,
  status: string,
): Item {
  if (meta.customTools.has(name)) {
    let input = "";
    try {
      input = String(JSON.parse(args).input ?? "");
    } catch {
      input = args;
    }
    return { type: "custom_tool_call", id, call_id: callId, name, input, status };
  }
  return { type: "function_call", id, call_id: callId, name, arguments: args, status };
}

function envelope(
  meta: ResponseMeta,
  status: string,
  output: Item[],
  r: Finish | null,
): Record<string, unknown> {
  const incomplete = r && r.finishReason === "length";
  return {
    id: meta.id,
    object: "response",
    created_at: meta.createdAt,
    status: incomplete ? "incomplete" : status,
    incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
    error: null,
    model: meta.model,
    output,
    previous_response_id: null,
    usage: r ? responseUsage(r) : null,
    ...meta.echo,
  };
}

/** The non-streamed `response`. */
export function responseObject(meta: ResponseMeta, pieces: ToolPiece[], r: Finish): Record<string, unknown> {
  const output: Item[] = [];
  for (const p of assembleCalls(pieces)) {
    if (p.type === "text") output.push(messageItem(meta.itemId("msg_"), p.text, "completed"));
    else {
      output.push(
        callItem(meta, meta.itemId("fc_"), meta.itemId("call_"), p.call.name, p.call.arguments, "completed"),
      );
    }
  }
  return envelope(meta, "completed", output, r);
}

/** The stream's events, piece by piece; every event carries its sequence_number. */
export class ResponseEvents {
  #seq = 0;
  #output: Item[] = [];
  /** The output item being written: a message (text so far) or a call (arguments so far). */
  #open: { item: Item; index: number; text: string } | null = null;

  constructor(readonly meta: ResponseMeta) {}

  #event(type: string, body: Record<string, unknown>): NamedEvent {
    return [type, { type, sequence_number: this.#seq++, ...body }];
  }

  start(): NamedEvent[] {
    const response = envelope(this.meta, "in_progress", [], null);
    return [this.#event("response.created", { response }), this.#event("response.in_progress", { response })];
  }

  piece(p: ToolPiece): NamedEvent[] {
    const out: NamedEvent[] = [];
    if (p.type === "text") {
      if (this.#open?.item.type !== "message") {
        this.#close(out);
        this.#begin(messageItem(this.meta.itemId("msg_"), "", "in_progress"), out);
        out.push(this.#event("response.content_part.added", {
          ...this.#where(),
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] },
        }));
      }
      this.#open!.text += p.text;
      out.push(
        this.#event("response.output_text.delta", {
          ...this.#where(),
          content_index: 0,
          delta: p.text,
          logprobs: [],
        }),
      );
    } else if (p.type === "call_start") {
      this.#close(out);
      const item = callItem(
        this.meta,
        this.meta.itemId("fc_"),
        this.meta.itemId("call_"),
        p.name,
        "",
        "in_progress",
      );
      this.#begin(item, out);
    } else if (p.type === "call_args") {
      this.#open!.text += p.delta;
      // A freeform tool's input is only known whole (it is inside the arguments' JSON).
      if (this.#open!.item.type === "function_call") {
        out.push(this.#event("response.function_call_arguments.delta", { ...this.#where(), delta: p.delta }));
      }
    } else this.#close(out);
    return out;
  }

  end(r: Finish): NamedEvent[] {
    const out: NamedEvent[] = [];
    this.#close(out);
    const response = envelope(this.meta, "completed", this.#output, r);
    out.push(
      this.#event(response.status === "incomplete" ? "response.incomplete" : "response.completed", {
        response,
      }),
    );
    return out;
  }

  #where(): Record<string, unknown> {
    return { item_id: this.#open!.item.id, output_index: this.#open!.index };
  }

  #begin(item: Item, out: NamedEvent[]): void {
    this.#open = { item, index: this.#output.length, text: "" };
    this.#output.push(item);
    out.push(this.#event("response.output_item.added", { output_index: this.#open.index, item }));
  }

  #close(out: NamedEvent[]): void {
    const o = this.#open;
    if (!o) return;
    this.#open = null;
    let done: Item;
    if (o.item.type === "message") {
      const part = { type: "output_text", text: o.text, annotations: [], logprobs: [] };
      const where = { item_id: o.item.id, output_index: o.index, content_index: 0 };
      out.push(this.#event("response.output_text.done", { ...where, text: o.text, logprobs: [] }));
      out.push(this.#event("response.content_part.done", { ...where, part }));
      done = messageItem(String(o.item.id), o.text, "completed");
    } else {
      const name = String(o.item.name);
      done = callItem(this.meta, String(o.item.id), String(o.item.call_id), name, o.text, "completed");
      if (done.type === "function_call") {
        out.push(this.#event("response.function_call_arguments.done", {
          item_id: o.item.id,
          output_index: o.index,
          name,
          arguments: o.text,
        }));
      } else {
        out.push(this.#event("response.custom_tool_call_input.done", {
          item_id: o.item.id,
          output_index: o.index,
          input: done.input,
        }));
      }
    }
    this.#output[o.index] = done;
    out.push(this.#event("response.output_item.done", { output_index: o.index, item: done }));
  }
}

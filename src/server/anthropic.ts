/**
 * Anthropic-compatible routes: POST /v1/messages (streaming with the real event sequence: message_start,
 * content_block_start/delta/stop, message_delta, message_stop) and POST /v1/messages/count_tokens.
 * @module
 */
import { Hono } from "hono";
import type { GenerationResult } from "../engine/scheduler.ts";
import { readMessagesRequest, readPromptSpec } from "./anthropic_request.ts";
import { checkModel, type ServerCtx, withRequest } from "./context.ts";
import { asFlintError, errorBody } from "./errors.ts";
import { Job, randomId } from "./job.ts";
import { renderChat } from "./prompt.ts";
import { type SseSink, sseResponse } from "./sse.ts";
import type { ParsedCall } from "./tools.ts";
import { Fields } from "./validate.ts";

type Block = { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

function stopReason(r: GenerationResult, calls: number): { stop_reason: string; stop_sequence: string | null } {
  if (r.finishReason === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (calls) return { stop_reason: "tool_use", stop_sequence: null };
  if (r.stopSequence !== null) return { stop_reason: "stop_sequence", stop_sequence: r.stopSequence };
  return { stop_reason: "end_turn", stop_sequence: null };
}

function toolUse(call: ParsedCall): Block {
  return { type: "tool_use", id: randomId("toolu_"), name: call.name, input: JSON.parse(call.arguments) };
}

function streamError(e: unknown, sink: SseSink): void {
  sink.send(errorBody(asFlintError(e), "anthropic"), "error");
}

export function anthropicRoutes(ctx: ServerCtx): Hono {
  const app = new Hono();

  app.post("/v1/messages", (c) =>
    withRequest(ctx, c.req.raw, async ({ body, served, abort, hold }) => {
      const req = readMessagesRequest(new Fields(body));
      checkModel(ctx, served, req.model);
      const prompt = renderChat(served.tokenizer, req.spec);
      const job = new Job(served, { prompt, maxTokens: req.maxTokens, sampling: req.sampling, stop: req.stop, signal: abort.signal }, ctx.metrics);
      const id = randomId("msg_");
      const model = served.name;
      const headers = { "flint-sequence-id": String(job.id) };
      const usage = (r: GenerationResult) => ({
        input_tokens: r.promptTokens, output_tokens: r.completionTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0,
      });

      if (!req.stream) {
        const content: Block[] = [];
        let calls = 0;
        for await (const p of job.pieces()) {
          const last = content[content.length - 1];
          if (p.type === "text") {
            if (last?.type === "text") last.text += p.text;
            else content.push({ type: "text", text: p.text });
          } else {
            calls++;
            content.push(toolUse(p.call));
          }
        }
        const r = await job.result();
        if (r.finishReason === "cancelled") return c.body(null, 499 as any);
        return c.json({ id, type: "message", role: "assistant", model, content, ...stopReason(r, calls), usage: usage(r) }, 200, headers);
      }

      const release = hold();
      return sseResponse(async (sink) => {
        try {
          sink.send({
            type: "message_start",
            message: {
              id, type: "message", role: "assistant", model, content: [], stop_reason: null, stop_sequence: null,
              usage: { input_tokens: job.promptTokens, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
            },
          }, "message_start");
          let index = -1;
          let open: "text" | null = null;
          let calls = 0;
          const stop = () => {
            if (open) sink.send({ type: "content_block_stop", index }, "content_block_stop");
            open = null;
          };
          for await (const p of job.pieces()) {
            if (p.type === "text") {
              if (open !== "text") {
                index++;
                open = "text";
                sink.send({ type: "content_block_start", index, content_block: { type: "text", text: "" } }, "content_block_start");
              }
              sink.send({ type: "content_block_delta", index, delta: { type: "text_delta", text: p.text } }, "content_block_delta");
            } else {
              stop();
              index++;
              calls++;
              const block = toolUse(p.call) as Extract<Block, { type: "tool_use" }>;
              sink.send({ type: "content_block_start", index, content_block: { ...block, input: {} } }, "content_block_start");
              sink.send({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: p.call.arguments } }, "content_block_delta");
              sink.send({ type: "content_block_stop", index }, "content_block_stop");
            }
          }
          stop();
          const r = await job.result();
          if (r.finishReason === "cancelled") return;
          sink.send({ type: "message_delta", delta: stopReason(r, calls), usage: { output_tokens: r.completionTokens } }, "message_delta");
          sink.send({ type: "message_stop" }, "message_stop");
        } finally {
          release();
        }
      }, { abort, onError: streamError, ping: (s) => s.send({ type: "ping" }, "ping"), headers });
    }));

  app.post("/v1/messages/count_tokens", (c) =>
    withRequest(ctx, c.req.raw, ({ body, served }) => {
      const f = new Fields(body);
      checkModel(ctx, served, f.string("model", { nonEmpty: true }));
      const prompt = renderChat(served.tokenizer, readPromptSpec(f));
      return Promise.resolve(c.json({ input_tokens: prompt.ids.length }));
    }));

  return app;
}

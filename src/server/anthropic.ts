/**
 * Anthropic-compatible routes: POST /v1/messages (streaming with the real event sequence: message_start,
 * content_block_start/delta/stop, message_delta, message_stop) and POST /v1/messages/count_tokens.
 * @module
 */
import { Hono } from "hono";
import type { GenerationResult } from "../engine/scheduler.ts";
import { readMessagesRequest, readPromptSpec } from "./anthropic_request.ts";
import { messageBody, MessageEvents } from "./anthropic_wire.ts";
import { checkModel, type ServerCtx, withRequest } from "./context.ts";
import { asFlintError, errorBody } from "./errors.ts";
import { Job, randomId, renderPrompt } from "./job.ts";
import { sseResponse, type SseSink } from "./sse.ts";
import type { ToolPiece } from "./tools.ts";
import { Fields } from "./validate.ts";

function streamError(e: unknown, sink: SseSink): void {
  sink.send(errorBody(asFlintError(e), "anthropic"), "error");
}

export function anthropicRoutes(ctx: ServerCtx): Hono {
  const app = new Hono();

  app.post("/v1/messages", (c) =>
    withRequest(ctx, c.req.raw, async ({ body, served, abort, hold }) => {
      const req = readMessagesRequest(new Fields(body));
      checkModel(ctx, served, req.model);
      const prompt = await renderPrompt(served, req.spec);
      const job = new Job(served, {
        prompt,
        maxTokens: req.maxTokens,
        sampling: req.sampling,
        stop: req.stop,
        signal: abort.signal,
      }, ctx.metrics);
      const meta = { id: randomId("msg_"), model: served.name, callId: () => randomId("toolu_") };
      const headers = { "flint-sequence-id": String(job.id) };

      if (!req.stream) {
        const { pieces, result } = await job.whole();
        return c.json(messageBody(meta, pieces, result), 200, headers);
      }

      const events = new MessageEvents(meta);
      const source = {
        start: () => events.start(job.promptTokens),
        piece: (p: ToolPiece) => events.piece(p),
        end: (r: GenerationResult) => events.end(r),
      };
      return sseResponse(job.namedEvents(source, hold()), {
        abort,
        onError: streamError,
        ping: (s) => s.send({ type: "ping" }, "ping"),
        keepAliveMs: ctx.config.keepAliveMs,
        headers,
      });
    }));

  app.post("/v1/messages/count_tokens", (c) =>
    withRequest(ctx, c.req.raw, async ({ body, served }) => {
      const f = new Fields(body);
      checkModel(ctx, served, f.string("model", { nonEmpty: true }));
      // Counted however long (in the prompt worker): agents ask precisely to learn that it is too long.
      const prompt = await served.prompts.render(readPromptSpec(f), { grammar: false });
      return c.json({ input_tokens: prompt.ids.length });
    }));

  return app;
}

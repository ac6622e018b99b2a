/**
 * OpenAI Responses route: POST /v1/responses, streamed (the response.* event sequence) or not. Requests are
 * read by responses_request.ts, objects and events built by responses_wire.ts from the same output pieces.
 * Nothing is stored (`store` is answered false).
 * @module
 */
import { Hono } from "hono";
import { checkModel, type ServerCtx, withRequest } from "./context.ts";
import { asFlintError, errorBody } from "./errors.ts";
import { Job, randomId, renderPrompt } from "./job.ts";
import { readResponsesRequest } from "./responses_request.ts";
import { ResponseEvents, responseObject } from "./responses_wire.ts";
import { sseResponse, type SseSink } from "./sse.ts";
import { Fields } from "./validate.ts";

/** A failure after the stream started: `response.failed`, whose error.code clients act on (Codex). */
function streamError(id: string, e: unknown, sink: SseSink): void {
  const body = errorBody(asFlintError(e), "openai").error as Record<string, unknown>;
  const error = { code: body.code, message: body.message };
  sink.send(
    { type: "response.failed", response: { id, object: "response", status: "failed", error } },
    "response.failed",
  );
}

export function responsesRoutes(ctx: ServerCtx): Hono {
  const app = new Hono();

  app.post("/v1/responses", (c) =>
    withRequest(ctx, c.req.raw, async ({ body, served, abort, hold }) => {
      const req = readResponsesRequest(new Fields(body));
      checkModel(ctx, served, req.model);
      const prompt = await renderPrompt(served, req.spec);
      const job = new Job(served, {
        prompt,
        maxTokens: req.maxTokens,
        sampling: req.sampling,
        stop: [],
        signal: abort.signal,
      }, ctx.metrics);
      const meta = {
        id: randomId("resp_"),
        createdAt: Math.floor(Date.now() / 1000),
        model: served.name,
        echo: req.echo,
        customTools: req.customTools,
        itemId: randomId,
      };
      const headers: Record<string, string> = { "flint-sequence-id": String(job.id) };
      if (req.notes.length) {
        headers["flint-note"] = req.notes.join("; ");
        console.log(`[flint] /v1/responses: ${req.notes.join("; ")}`);
      }

      if (!req.stream) {
        const { pieces, result } = await job.whole();
        return c.json(responseObject(meta, pieces, result), 200, headers);
      }

      return sseResponse(job.namedEvents(new ResponseEvents(meta), hold()), {
        abort,
        onError: (e, sink) => streamError(meta.id, e, sink),
        ping: (s) => s.raw(": keep-alive"),
        keepAliveMs: ctx.config.keepAliveMs,
        headers,
      });
    }));

  return app;
}

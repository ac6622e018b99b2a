/**
 * OpenAI-compatible routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models.
 * Wire shapes follow openai-node (chat.completion, chat.completion.chunk, text_completion).
 * @module
 */
import { Hono } from "hono";
import { ValidationError } from "../errors.ts";
import { checkModel, type ServerCtx, withRequest } from "./context.ts";
import type { Served } from "./host.ts";
import { asFlintError, errorBody } from "./errors.ts";
import { checkLength, Job, randomId, renderPrompt } from "./job.ts";
import { readCommon, readMessages, readResponseFormat, readTools } from "./openai_request.ts";
import { ChatChunker, chatCompletion, finishReason, usage } from "./openai_wire.ts";
import { sseResponse, type SseSink } from "./sse.ts";
import { Fields } from "./validate.ts";

const now = () => Math.floor(Date.now() / 1000);

function streamError(e: unknown, sink: SseSink): void {
  sink.send(errorBody(asFlintError(e), "openai"));
  sink.raw("data: [DONE]");
}

export function openaiRoutes(ctx: ServerCtx): Hono {
  const app = new Hono();

  app.post(
    "/v1/chat/completions",
    (c) =>
      withRequest(ctx, c.req.raw, async ({ body, served, abort, hold }) => {
        const f = new Fields(body);
        const common = readCommon(f, null);
        checkModel(ctx, served, common.model);
        const turns = readMessages(f);
        const { tools, toolChoice } = readTools(f);
        const responseFormat = readResponseFormat(f);
        const prompt = await renderPrompt(served, { turns, tools, toolChoice, responseFormat });
        const job = new Job(served, {
          prompt,
          maxTokens: common.maxTokens,
          sampling: common.sampling,
          stop: common.stop,
          signal: abort.signal,
        }, ctx.metrics);
        const meta = {
          id: randomId("chatcmpl-"),
          created: now(),
          model: served.name,
          includeUsage: common.includeUsage,
          callId: () => randomId("call_"),
        };
        const headers = { "flint-sequence-id": String(job.id) };

        if (!common.stream) {
          const { pieces, result } = await job.whole();
          return c.json(chatCompletion(meta, pieces, result), 200, headers);
        }

        const release = hold();
        const chunker = new ChatChunker(meta);
        return sseResponse(async (sink) => {
          try {
            for (const x of chunker.start()) sink.send(x);
            for await (const p of job.pieces()) for (const x of chunker.piece(p)) sink.send(x);
            const r = await job.result();
            if (r.finishReason === "cancelled") return;
            for (const x of chunker.end(r)) sink.send(x);
            sink.raw("data: [DONE]");
          } finally {
            release();
          }
        }, {
          abort,
          onError: streamError,
          ping: (s) => s.raw(": keep-alive"),
          keepAliveMs: ctx.config.keepAliveMs,
          headers,
        });
      }),
  );

  app.post("/v1/completions", (c) =>
    withRequest(ctx, c.req.raw, async ({ body, served, abort, hold }) => {
      const f = new Fields(body);
      const common = readCommon(f, 16);
      checkModel(ctx, served, common.model);
      if (f.optBool("echo")) throw new ValidationError("echo is not supported", "echo");
      if (f.has("suffix")) {
        throw new ValidationError("suffix (fill-in-the-middle) is not supported", "suffix");
      }
      const prompt = { ids: await readPrompt(f, served), forced: "", parseTools: false };
      const job = new Job(served, {
        prompt,
        maxTokens: common.maxTokens,
        sampling: common.sampling,
        stop: common.stop,
        signal: abort.signal,
      }, ctx.metrics);
      const id = randomId("cmpl-");
      const created = now();
      const model = served.name;
      const headers = { "flint-sequence-id": String(job.id) };
      const choice = (text: string, finish: string | null) => ({
        text,
        index: 0,
        logprobs: null,
        finish_reason: finish,
      });

      if (!common.stream) {
        const { pieces, result: r } = await job.whole();
        const text = pieces.map((p) => (p.type === "text" ? p.text : "")).join("");
        return c.json(
          {
            id,
            object: "text_completion",
            created,
            model,
            choices: [choice(text, finishReason(r, 0))],
            usage: usage(r),
          },
          200,
          headers,
        );
      }
      const release = hold();
      return sseResponse(async (sink) => {
        try {
          for await (const p of job.pieces()) {
            if (p.type === "text") {
              sink.send({ id, object: "text_completion", created, model, choices: [choice(p.text, null)] });
            }
          }
          const r = await job.result();
          if (r.finishReason === "cancelled") {
            return;
          }
          sink.send({
            id,
            object: "text_completion",
            created,
            model,
            choices: [choice("", finishReason(r, 0))],
          });
          if (common.includeUsage) {
            sink.send({ id, object: "text_completion", created, model, choices: [], usage: usage(r) });
          }
          sink.raw("data: [DONE]");
        } finally {
          release();
        }
      }, {
        abort,
        onError: streamError,
        ping: (s) => s.raw(": keep-alive"),
        keepAliveMs: ctx.config.keepAliveMs,
        headers,
      });
    }));

  // Anthropic's SDK lists models at the same paths; answer in the shape the client speaks.
  const modelObject = (served: Served, anthropic: boolean) =>
    anthropic
      ? { type: "model", id: served.name, display_name: served.name, created_at: new Date(0).toISOString() }
      : {
        id: served.name,
        object: "model",
        created: 0,
        owned_by: "flint",
        context_window: served.info.contextWindow,
        max_model_len: served.info.contextWindow,
      };

  app.get("/v1/models", (c) => {
    const served = ctx.host.served;
    const m = modelObject(served, !!c.req.header("anthropic-version"));
    if (c.req.header("anthropic-version")) {
      return c.json({ data: [m], has_more: false, first_id: served.name, last_id: served.name });
    }
    return c.json({ object: "list", data: [m] });
  });

  app.get("/v1/models/:id{.+}", (c) => {
    const served = ctx.host.served;
    checkModel(ctx, served, decodeURIComponent(c.req.param("id")));
    return c.json(modelObject(served, !!c.req.header("anthropic-version")));
  });

  return app;
}

/** `prompt`: one string or one array of token ids (several prompts per request are not supported). */
async function readPrompt(f: Fields, served: Served): Promise<Uint32Array> {
  let v = f.raw("prompt");
  if (Array.isArray(v) && v.length === 1 && (typeof v[0] === "string" || Array.isArray(v[0]))) v = v[0];
  if (typeof v === "string") {
    if (!v) throw new ValidationError("prompt must not be empty", "prompt");
    checkLength(served, v);
    return await served.prompts.encode(v);
  }
  if (Array.isArray(v) && v.length && v.every((x) => typeof x === "number")) {
    const vocab = served.info.vocab;
    if (!v.every((x) => Number.isInteger(x) && x >= 0 && x < vocab)) {
      throw new ValidationError(`prompt token ids must be integers in [0, ${vocab})`, "prompt");
    }
    return Uint32Array.from(v as number[]);
  }
  if (Array.isArray(v) && v.length > 1) {
    throw new ValidationError(
      "several prompts in one request are not supported; send one request per prompt",
      "prompt",
    );
  }
  throw new ValidationError("prompt must be a non-empty string or an array of token ids", "prompt");
}

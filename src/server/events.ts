/**
 * GET /events: a live SSE feed of scheduler events, so a client can draw a progress bar while a long cold
 * prompt is prefilled: `{"type":"prefill","id":N,"processed":P,"total":T}` per chunk and, between chunks,
 * the same with `"estimated": true` (progress.ts), plus `start`, `finish` and `model` (after a swap).
 * `?id=N` keeps one request's events (N: its `flint-sequence-id` header). The first event, `ready`, says
 * the feed is attached.
 * @module
 */
import { ValidationError } from "../errors.ts";
import type { ServerCtx } from "./context.ts";
import type { FeedEvent } from "./progress.ts";
import { sseResponse } from "./sse.ts";

export function eventsResponse(ctx: ServerCtx, req: Request): Response {
  const idParam = new URL(req.url).searchParams.get("id");
  const only = idParam === null ? null : Number(idParam);
  if (only !== null && !(Number.isInteger(only) && only > 0)) {
    throw new ValidationError(`id must be a request's positive integer id, got "${idParam}"`, "id");
  }
  const abort = new AbortController();
  req.signal.addEventListener("abort", () => abort.abort(), { once: true });
  return sseResponse((sink) =>
    new Promise<void>((resolve) => {
      const unlisten = ctx.progress.listen((e: FeedEvent) => {
        if (only === null || !("id" in e) || e.id === only) sink.send(e);
      });
      const { name, info } = ctx.host.served;
      sink.send({ type: "ready", model: name, context_window: info.contextWindow });
      sink.signal.addEventListener("abort", () => {
        unlisten();
        resolve();
      }, { once: true });
    }), {
    abort,
    ping: (s) => s.raw(": keep-alive"),
    keepAliveMs: ctx.config.keepAliveMs,
    onError: () => {},
  });
}

/**
 * GET /events: a live SSE feed of scheduler events, so a client can draw a progress bar while a long cold
 * prompt is prefilled: `{"type":"prefill","id":N,"processed":P,"total":T}` per chunk, plus `start`,
 * `finish` and `model` (after a swap). The first event, `ready`, says the feed is attached.
 * @module
 */
import type { ServerCtx } from "./context.ts";
import type { HostEvent } from "./host.ts";
import { sseResponse } from "./sse.ts";

export function eventsResponse(ctx: ServerCtx, req: Request): Response {
  const abort = new AbortController();
  req.signal.addEventListener("abort", () => abort.abort(), { once: true });
  return sseResponse((sink) =>
    new Promise<void>((resolve) => {
      const listener = (e: HostEvent) => sink.send(e);
      ctx.host.listeners.add(listener);
      const { name, engine } = ctx.host.served;
      sink.send({ type: "ready", model: name, context_window: engine.contextWindow });
      sink.signal.addEventListener("abort", () => {
        ctx.host.listeners.delete(listener);
        resolve();
      }, { once: true });
    }), {
    abort,
    ping: (s) => s.raw(": keep-alive"),
    onError: () => {},
  });
}

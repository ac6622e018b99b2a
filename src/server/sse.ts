/**
 * Server-sent events. The response body is a ReadableStream we own: when the client goes away the runtime
 * cancels it, and that, not the request body, is what aborts the generation (`signal`).
 * @module
 */

/** One named SSE event: `event: NAME` and its JSON data (Anthropic's and the Responses API's streams). */
export type NamedEvent = [event: string, data: Record<string, unknown>];

export interface SseSink {
  /** `data: <json>` (with `event:` when given). No-op once the client is gone. */
  send(data: unknown, event?: string): void;
  /** A raw line such as `data: [DONE]` or a `: comment`. */
  raw(text: string): void;
  readonly signal: AbortSignal;
}

export interface SseOptions {
  /** Aborted when the client disconnects. */
  abort: AbortController;
  /** Sent every `keepAliveMs` while the producer runs (a prefill can take long before the first token). */
  ping?: (sink: SseSink) => void;
  keepAliveMs?: number;
  /** Turns an error thrown by the producer into a last event. */
  onError: (e: unknown, sink: SseSink) => void;
  headers?: Record<string, string>;
}

const enc = new TextEncoder();

export function sseResponse(produce: (sink: SseSink) => Promise<void>, opts: SseOptions): Response {
  let ctrl!: ReadableStreamDefaultController<Uint8Array>;
  let open = true;
  const signal = opts.abort.signal;
  const write = (s: string) => {
    if (!open || signal.aborted) return;
    try {
      ctrl.enqueue(enc.encode(s));
    } catch {
      open = false;
    }
  };
  const sink: SseSink = {
    send: (data, event) => write(`${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`),
    raw: (text) => write(`${text}\n\n`),
    signal,
  };
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      ctrl = c;
      const timer = opts.ping ? setInterval(() => opts.ping!(sink), opts.keepAliveMs ?? 10_000) : undefined;
      produce(sink)
        .catch((e) => {
          if (!signal.aborted) opts.onError(e, sink);
        })
        .finally(() => {
          clearInterval(timer);
          if (open) {
            open = false;
            try {
              c.close();
            } catch { /* already cancelled */ }
          }
        });
    },
    cancel() {
      open = false;
      opts.abort.abort();
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
      ...opts.headers,
    },
  });
}

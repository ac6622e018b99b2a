/**
 * The chat UI against a Flint server (or any OpenAI-compatible one): streaming `/v1/chat/completions` with
 * the server's own token counts (`stream_options.include_usage`), and `/events?id=N` (server-sent events, N
 * from the `flint-sequence-id` response header) for the prompt progress the OpenAI stream does not carry.
 * Both are read with fetch, so an API key goes along as `Authorization: Bearer`, also to another origin.
 * @module
 */
import type { ChatBackend, ChatTurn, ReplyHandlers, ReplyStats, Sampling } from "./backend.ts";

/** The server answered 401: no API key, or the wrong one. */
export class AuthError extends Error {
  constructor(readonly url: string, readonly keySent: boolean) {
    super(keySent ? `the server rejected the API key (HTTP 401)` : `the server needs an API key (HTTP 401)`);
    this.name = "AuthError";
  }
}

/** Model ids the server offers; throws AuthError on 401, else an Error with the status or network error. */
export async function listServerModels(
  base: string,
  opts: { apiKey?: string; signal?: AbortSignal } = {},
): Promise<string[]> {
  const url = new URL("v1/models", base).href;
  const r = await fetch(url, { signal: opts.signal, headers: auth(opts.apiKey) });
  if (r.status === 401) throw new AuthError(url, !!opts.apiKey);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  const j = await r.json();
  return (j.data ?? []).map((m: { id: string }) => m.id);
}

export class RemoteModel implements ChatBackend {
  /** `base` ends with "/": the server root. */
  constructor(readonly base: string, readonly model: string, readonly apiKey = "") {}

  get label(): string {
    return `${this.model} · server ${new URL(this.base).host}`;
  }

  async reply(turns: ChatTurn[], s: Sampling, on: ReplyHandlers, signal: AbortSignal): Promise<ReplyStats> {
    const body: Record<string, unknown> = {
      model: this.model,
      messages: turns,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: s.maxTokens,
      temperature: s.temperature,
      top_p: s.topP,
      seed: s.seed,
    };
    // Not OpenAI fields: sent only when used, so strict servers are not bothered by them.
    if (s.topK > 0) body.top_k = s.topK;
    if (s.minP > 0) body.min_p = s.minP;
    const t0 = performance.now();
    let tFirst = 0, tEnd = 0;
    let usage: {
      prompt_tokens?: number;
      completion_tokens?: number;
      prompt_tokens_details?: { cached_tokens?: number };
    } | null = null;
    let finish = "stop";
    let progress: { close(): void } | null = null;
    try {
      const url = new URL("v1/chat/completions", this.base).href;
      const r = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...auth(this.apiKey) },
        body: JSON.stringify(body),
        signal,
      });
      if (r.status === 401) throw new AuthError(url, !!this.apiKey);
      if (!r.ok || !r.body) throw new Error(await errorText(r));
      const seq = Number(r.headers.get("flint-sequence-id"));
      if (Number.isInteger(seq) && seq > 0) progress = this.#watchPrefill(seq, on, signal);
      for await (const data of sseData(r.body)) {
        if (data === "[DONE]") break;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message ?? JSON.stringify(j.error));
        if (j.usage) usage = j.usage;
        const choice = j.choices?.[0];
        if (choice?.finish_reason) finish = choice.finish_reason;
        const text = choice?.delta?.content;
        if (text) {
          if (!tFirst) {
            tFirst = performance.now();
            progress?.close();
          }
          on.onText(text);
        }
      }
      tEnd = performance.now();
    } catch (e) {
      if (signal.aborted) finish = "cancelled";
      else throw e;
    } finally {
      progress?.close();
    }
    // Only the server's counts: a stream stopped before its usage report has no count (text chunks are not
    // tokens: a chunk may hold several, or none when a stop string is held back).
    const n = typeof usage?.completion_tokens === "number" ? usage.completion_tokens : null;
    const prompt = typeof usage?.prompt_tokens === "number" ? usage.prompt_tokens : null;
    const cached = usage?.prompt_tokens_details?.cached_tokens;
    return {
      promptTokens: prompt,
      cachedTokens: typeof cached === "number" ? cached : null,
      completionTokens: n,
      ttftMs: tFirst ? tFirst - t0 : null,
      // The first token's time is the TTFT; the n − 1 after it are decoded until the stream's end.
      decodeTps: n !== null && n > 1 && tFirst && tEnd > tFirst ? (n - 1) / ((tEnd - tFirst) / 1000) : null,
      finishReason: finish,
    };
  }

  /**
   * Prefill progress of request `id` from `/events?id=N`: real per-chunk reports and, in between, the
   * server's estimates (`"estimated": true`). Events of other requests are dropped here too, for a server
   * that ignores `id`. A server without the feed simply gives no progress bar.
   */
  #watchPrefill(id: number, on: ReplyHandlers, signal: AbortSignal): { close(): void } {
    const stop = new AbortController();
    const abort = () => stop.abort();
    signal.addEventListener("abort", abort, { once: true });
    (async () => {
      const url = new URL(`events?id=${id}`, this.base);
      const r = await fetch(url, { headers: auth(this.apiKey), signal: stop.signal });
      if (!r.ok || !r.body) return;
      for await (const data of sseData(r.body)) {
        const p = prefillUpdate(data, id);
        if (p) on.onPrefill(p.processed, p.total, p.estimated);
        if (p && !p.estimated && p.processed >= p.total) break;
        if (isFinish(data, id)) break;
      }
    })().catch(() => {/* aborted, or no feed: no progress bar */}).finally(() => {
      stop.abort();
      signal.removeEventListener("abort", abort);
    });
    return { close: abort };
  }
}

/** A feed event's prefill progress for request `id`, or null (another request, another kind, not JSON). */
export function prefillUpdate(
  data: string,
  id: number,
): { processed: number; total: number; estimated: boolean } | null {
  let e: any;
  try {
    e = JSON.parse(data);
  } catch {
    return null;
  }
  if (e?.type !== "prefill" || e.id !== id) return null;
  if (!(Number.isFinite(e.processed) && Number.isFinite(e.total) && e.total > 0)) return null;
  return { processed: e.processed, total: e.total, estimated: e.estimated === true };
}

function isFinish(data: string, id: number): boolean {
  try {
    const e = JSON.parse(data);
    return e?.type === "finish" && e.id === id;
  } catch {
    return false;
  }
}

function auth(key?: string): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

/** The `data:` payloads of a server-sent-events stream. */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i).replace(/^\r?\n\r?\n/, "");
        const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) =>
          l.slice(5).replace(/^ /, "")
        );
        if (data.length) yield data.join("\n");
      }
    }
  } finally {
    // Leaving early (a break) closes the connection.
    await reader.cancel().catch(() => {});
  }
}

async function errorText(r: Response): Promise<string> {
  const t = await r.text().catch(() => "");
  try {
    const j = JSON.parse(t);
    if (j.error?.message) return `server: ${j.error.message} (HTTP ${r.status})`;
  } catch { /* not JSON */ }
  return `server answered HTTP ${r.status}${t ? `: ${t.slice(0, 200)}` : ""}`;
}

/**
 * The chat UI against a Flint server (or any OpenAI-compatible one): streaming `/v1/chat/completions`, and
 * `/events` (server-sent events) for the prompt-reading progress that the OpenAI stream does not carry.
 * @module
 */
import type { ChatBackend, ChatTurn, ReplyHandlers, ReplyStats, Sampling } from "./backend.ts";

/** Model ids the server offers; throws with the HTTP status or network error. */
export async function listServerModels(base: string, opts: { apiKey?: string; signal?: AbortSignal } = {}): Promise<string[]> {
  const r = await fetch(new URL("v1/models", base), { signal: opts.signal, headers: auth(opts.apiKey) });
  if (!r.ok) throw new Error(`${new URL("v1/models", base)}: HTTP ${r.status}`);
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
    const events = this.#watchPrefill(on);
    const t0 = performance.now();
    let tFirst = 0, tLast = 0, chunks = 0;
    let usage: { prompt_tokens?: number; completion_tokens?: number } | null = null;
    let finish = "stop";
    try {
      const r = await fetch(new URL("v1/chat/completions", this.base), {
        method: "POST",
        headers: { "content-type": "application/json", ...auth(this.apiKey) },
        body: JSON.stringify(body),
        signal,
      });
      if (!r.ok || !r.body) throw new Error(await errorText(r));
      for await (const data of sseData(r.body)) {
        if (data === "[DONE]") break;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message ?? JSON.stringify(j.error));
        if (j.usage) usage = j.usage;
        const choice = j.choices?.[0];
        if (choice?.finish_reason) finish = choice.finish_reason;
        const text = choice?.delta?.content;
        if (text) {
          const now = performance.now();
          if (!tFirst) {
            tFirst = now;
            events.close();
          }
          tLast = now;
          chunks++;
          on.onText(text);
        }
      }
    } catch (e) {
      if (signal.aborted) finish = "cancelled";
      else throw e;
    } finally {
      events.close();
    }
    const n = usage?.completion_tokens ?? chunks;
    return {
      promptTokens: usage?.prompt_tokens ?? 0,
      completionTokens: n,
      ttftMs: tFirst ? tFirst - t0 : 0,
      decodeTps: n > 1 && tLast > tFirst ? (n - 1) / ((tLast - tFirst) / 1000) : 0,
      finishReason: finish,
    };
  }

  /**
   * Prefill progress from `/events`: `{"type":"prefill","processed":N,"total":M}` messages. EventSource
   * cannot send an API key, so a server that wants one gives no progress bar.
   */
  #watchPrefill(on: ReplyHandlers): { close(): void } {
    if (typeof EventSource === "undefined" || this.apiKey) return { close() {} };
    let es: EventSource;
    try {
      es = new EventSource(new URL("events", this.base));
    } catch {
      return { close() {} };
    }
    const handle = (ev: MessageEvent) => {
      try {
        const e = JSON.parse(ev.data);
        if (e?.type === "prefill" && e.total > 0) on.onPrefill(e.processed, e.total);
      } catch { /* other event kinds */ }
    };
    es.onmessage = handle;
    es.addEventListener("prefill", handle as EventListener);
    es.onerror = () => es.close(); // a server without /events: no progress, no retries
    return { close: () => es.close() };
  }
}

function auth(key?: string): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

/** The `data:` payloads of a server-sent-events stream. */
async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  while (true) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i).replace(/^\r?\n\r?\n/, "");
      const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""));
      if (data.length) yield data.join("\n");
    }
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

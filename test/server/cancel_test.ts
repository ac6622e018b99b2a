/**
 * A client that goes away stops its request and frees its KV pages: mid-prefill and mid-decode over a
 * stream, and during a non-streaming request. /events reports the `cancelled` finish; /health shows KV use
 * back at its baseline; the server keeps serving.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { health, type RunningServer, sseEvents, startServer, waitForHealth } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
let server: RunningServer;
let baseline: number;
// A long prompt in 16-token prefill chunks: many chunks to interrupt.
// Greedy output of this prompt runs past 120 tokens without an EOS.
const DECODE_PROMPT = "Write a python class for a bank account with many methods.";
const LONG = Array.from({ length: 40 }, (_, i) => `def f${i}(x): return x + ${i}`).join("\n");

/** A live /events feed that records everything it sees. */
class Feed {
  seen: any[] = [];
  #done: Promise<void>;
  constructor(res: Response, readonly ac: AbortController) {
    this.#done = (async () => {
      try {
        for await (const e of sseEvents(res)) this.seen.push(JSON.parse(e.data));
      } catch { /* closed */ }
    })();
  }
  static async open(): Promise<Feed> {
    const ac = new AbortController();
    const f = new Feed(await fetch(`${server.url}/events`, { signal: ac.signal }), ac);
    await f.until((e) => e.type === "ready");
    return f;
  }
  async until(pred: (e: any) => boolean, timeoutMs = 300_000): Promise<any> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.seen.find(pred);
      if (hit) return hit;
      if (Date.now() > end) throw new Error(`event never came; saw ${JSON.stringify(this.seen.slice(-5))}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  async close(): Promise<void> {
    this.ac.abort();
    await this.#done.catch(() => {});
  }
}

function chat(content: string, extra: Record<string, unknown>, signal: AbortSignal): Promise<Response> {
  return fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content }], temperature: 0, ...extra }),
    signal,
  });
}

const idle = (h: any) =>
  h.kv.used_pages === baseline && h.running === 0 && h.queue_depth === 0 && h.in_flight === 0;

beforeAll(async () => {
  server = await startServer(["--context-window", "1024", "--max-batch", "2", "--prefill-chunk", "16"]);
  baseline = (await health(server.url)).kv.used_pages;
});
afterAll(async () => {
  await server?.stop();
});

describe("client disconnects", () => {
  test("mid-prefill: the sequence stops before its prompt is done and its KV pages are freed", async () => {
    const feed = await Feed.open();
    const ac = new AbortController();
    const res = await chat(LONG, { max_tokens: 8, stream: true }, ac.signal);
    expect(res.status).toBe(200);
    const id = Number(res.headers.get("flint-sequence-id"));
    const first = await feed.until((e) => e.type === "prefill" && e.id === id);
    expect(first.total).toBeGreaterThan(5 * 16);
    ac.abort();
    await res.body?.cancel().catch(() => {});
    const fin = await feed.until((e) => e.type === "finish" && e.id === id);
    expect(fin.reason).toBe("cancelled");
    expect(fin.completionTokens).toBe(0);
    const last = feed.seen.filter((e) => e.type === "prefill" && e.id === id).pop();
    expect(last.processed).toBeLessThan(last.total);
    await waitForHealth(server.url, idle);
    await feed.close();
  });

  test("mid-decode: the stream's close stops generation and frees the sequence", async () => {
    const feed = await Feed.open();
    const ac = new AbortController();
    const res = await chat(DECODE_PROMPT, { max_tokens: 400, stream: true }, ac.signal);
    const id = Number(res.headers.get("flint-sequence-id"));
    let pieces = 0;
    for await (const e of sseEvents(res)) {
      if (JSON.parse(e.data).choices?.[0]?.delta?.content) pieces++;
      if (pieces >= 3) break; // leaving the loop cancels the body: the client is gone
    }
    ac.abort();
    const fin = await feed.until((e) => e.type === "finish" && e.id === id);
    expect(fin.reason).toBe("cancelled");
    expect(fin.completionTokens).toBeGreaterThan(0);
    expect(fin.completionTokens).toBeLessThan(400);
    await waitForHealth(server.url, idle);
    await feed.close();
  });

  test("a non-streaming request whose client leaves is cancelled too", async () => {
    const feed = await Feed.open();
    const ac = new AbortController();
    const pending = chat(DECODE_PROMPT, { max_tokens: 400 }, ac.signal).catch((e) => e);
    const start = await feed.until((e) => e.type === "start");
    await feed.until((e) => e.type === "prefill" && e.id === start.id && e.processed === e.total);
    ac.abort();
    expect(await pending).toBeInstanceOf(Error);
    const fin = await feed.until((e) => e.type === "finish" && e.id === start.id);
    expect(fin.reason).toBe("cancelled");
    expect(fin.completionTokens).toBeLessThan(400);
    await waitForHealth(server.url, idle);
    await feed.close();
  });

  test("the server keeps serving", async () => {
    const res = await chat("def add(a, b):", { max_tokens: 4 }, new AbortController().signal);
    expect(res.status).toBe(200);
    expect((await res.json()).usage.completion_tokens).toBe(4);
    await waitForHealth(server.url, idle);
  });
});

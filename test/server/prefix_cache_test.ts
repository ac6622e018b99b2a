/**
 * The prefix cache through the real server: a second turn on an 8k-token system prompt reads almost all of
 * its prompt from the cache, as both SDKs report it (OpenAI `prompt_tokens_details.cached_tokens`,
 * Anthropic `cache_read_input_tokens` beside the uncached `input_tokens`); /metrics and /health show it;
 * a budget of a few pages under 8 concurrent streams changes no output and leaks no page; 0 turns it off;
 * Anthropic's cache_control marks are accepted wherever clients put them.
 * The one cold 8k prefill dominates the file's time on a software GPU.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { health, type RunningServer, sseEvents, startServer, waitForHealth } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
/** The KV page of this model: 16 tokens × 8 layers × K and V × 2 heads × 64 values × f16. */
const PAGE_BYTES = 16 * 8 * 2 * 2 * 64 * 2;

/** Varied code-like lines (numbers everywhere, so no run of tokens repeats) of about `chars` characters. */
function sourceText(chars: number): string {
  const lines: string[] = [];
  for (let i = 0, n = 0; n < chars; i++) {
    const line = `    result_${i} = transform(items[${(i * 7) % 113}], scale=${
      (i * 37) % 1000
    }, name="k${i}")`;
    lines.push(line);
    n += line.length + 1;
  }
  return lines.join("\n");
}

/** A Prometheus sample's value (the first series of that name). */
function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
  if (!m) throw new Error(`${name} not in /metrics`);
  return Number(m[2]);
}

async function metrics(url: string): Promise<string> {
  return await (await fetch(`${url}/metrics`)).text();
}

/** Anthropic's usage splits the prompt: input_tokens is what was not read from the cache. */
const promptOf = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);

describe("an 8k-token system prompt, two turns, both SDKs", () => {
  let server: RunningServer;
  let openai: OpenAI;
  let anthropic: Anthropic;
  // ~8020 tokens with the bundled tokenizer (checked below through usage).
  const system = `You review this Python module.\n${sourceText(23_700)}`;
  const first = "What does result_17 hold?";
  const second = "And result_18?";

  beforeAll(async () => {
    server = await startServer(["--context-window", "8704", "--max-batch", "2"]);
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: server.url, apiKey: "x", maxRetries: 0 });
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("the second turn reads ≥ 95% of its prompt from the cache (OpenAI, then Anthropic)", async () => {
    expect(server.log()).toMatch(/prefix cache {4}up to [\d.]+ [KM]iB in memory \(\d+ KV pages\); disk off/);
    const turn1 = [{ role: "system" as const, content: system }, { role: "user" as const, content: first }];
    const a = await openai.chat.completions.create({
      model: MODEL,
      messages: turn1,
      max_tokens: 8,
      temperature: 0,
    });
    const prompt1 = a.usage!.prompt_tokens;
    expect(prompt1).toBeGreaterThanOrEqual(8000);
    expect(a.usage!.prompt_tokens_details!.cached_tokens).toBe(0);

    // Turn 2, streamed: the final usage chunk carries the cached count.
    const stream = await openai.chat.completions.create({
      model: MODEL,
      messages: [...turn1, { role: "assistant", content: a.choices[0].message.content ?? "" }, {
        role: "user",
        content: second,
      }],
      max_tokens: 8,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    expect(usage!.prompt_tokens).toBeGreaterThan(prompt1);
    expect(usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(0.95 * usage!.prompt_tokens);

    // The same conversation through Anthropic, cache_control marks and all: after the chat template it is
    // the same tokens, so its first turn already hits.
    const mark = { cache_control: { type: "ephemeral" as const } };
    const user1: Anthropic.MessageParam = { role: "user", content: [{ type: "text", text: first, ...mark }] };
    const b = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 8,
      temperature: 0,
      system: [{ type: "text", text: system, ...mark }],
      messages: [user1],
    } as Anthropic.MessageCreateParamsNonStreaming);
    expect(promptOf(b.usage)).toBe(prompt1);
    expect(b.usage.cache_read_input_tokens).toBeGreaterThanOrEqual(0.95 * prompt1);
    expect(b.usage.cache_creation_input_tokens).toBe(0);

    const reply = b.content.map((c) => (c.type === "text" ? c.text : "")).join("");
    const s = anthropic.messages.stream({
      model: MODEL,
      max_tokens: 8,
      temperature: 0,
      system,
      messages: [user1, { role: "assistant", content: reply || "ok" }, { role: "user", content: second }],
    } as Anthropic.MessageStreamParams);
    const deltas: Anthropic.MessageDeltaUsage[] = [];
    s.on("streamEvent", (e) => {
      if (e.type === "message_delta") deltas.push(e.usage);
    });
    const final = await s.finalMessage();
    // message_start went out before the cache was consulted; message_delta carries the split.
    expect(deltas.length).toBe(1);
    expect(deltas[0].cache_read_input_tokens).toBe(final.usage.cache_read_input_tokens);
    expect(promptOf(final.usage)).toBeGreaterThan(prompt1);
    expect(final.usage.cache_read_input_tokens).toBeGreaterThanOrEqual(0.95 * promptOf(final.usage));
    expect(final.usage.input_tokens).toBeLessThanOrEqual(0.05 * promptOf(final.usage));
  });

  test("/metrics counters move with hits and misses; /health shows the cache", async () => {
    const before = await metrics(server.url);
    const ask = () =>
      openai.responses.create({
        model: MODEL,
        input: `Explain this code:\n${sourceText(300)}`,
        max_output_tokens: 4,
        temperature: 0,
      });
    const r1 = await ask();
    const r2 = await ask();
    expect(r1.usage!.input_tokens_details.cached_tokens).toBe(0);
    expect(r2.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(0.8 * r2.usage!.input_tokens);
    const after = await metrics(server.url);
    const moved = (name: string) => metric(after, name) - metric(before, name);
    expect(moved("flint_prefix_cache_misses_total")).toBe(1);
    expect(moved("flint_prefix_cache_hits_total")).toBe(1);
    expect(moved("flint_prefix_cache_tokens_reused_total")).toBe(
      r2.usage!.input_tokens_details.cached_tokens,
    );
    expect(metric(after, "flint_prefix_cache_evictions_total")).toBe(0);
    expect(metric(after, "flint_prefix_cache_budget_bytes")).toBeGreaterThan(0);
    expect(metric(after, "flint_prefix_cache_disk_bytes")).toBe(0);

    const h = await waitForHealth(server.url, (h) => h.running === 0);
    const pc = h.prefix_cache;
    expect(pc).toMatchObject({ enabled: true, evictions: 0, disk: { dir: null, bytes: 0 } });
    expect(pc.hits).toBe(metric(after, "flint_prefix_cache_hits_total"));
    expect(pc.misses).toBe(metric(after, "flint_prefix_cache_misses_total"));
    expect(pc.tokens_reused).toBe(metric(after, "flint_prefix_cache_tokens_reused_total"));
    expect(pc.pages).toBeGreaterThan(0);
    expect(pc.bytes).toBe(pc.pages * h.kv.bytes_per_page);
    expect(pc.bytes).toBe(metric(after, "flint_prefix_cache_bytes"));
    expect(pc.budget_bytes).toBe(h.kv.total_pages * h.kv.bytes_per_page);
    // Nothing runs: every page the cache holds is idle, and no request holds any.
    expect(pc.idle_pages).toBe(pc.pages);
    expect(h.kv.used_pages).toBe(0);
    expect(h.kv.cached_pages).toBe(pc.pages);
    expect(h.kv.free_pages + h.kv.cached_pages).toBe(h.kv.total_pages);
  });
});

describe("a budget of a few pages under 8 concurrent streams", () => {
  let server: RunningServer;
  const budget = 4 * PAGE_BYTES;
  const shared = `You complete Python code.\n${sourceText(250)}`;
  const tails = [
    "def add(a, b):",
    "class Stack:",
    "import os\n",
    "def fib(n):",
    "for i in",
    "x = [",
    "if x",
    "#",
  ];

  beforeAll(async () => {
    server = await startServer([
      "--context-window",
      "512",
      "--max-batch",
      "8",
      "--prefix-cache-bytes",
      String(budget),
    ]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function streamChat(tail: string): Promise<string> {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "system", content: shared }, { role: "user", content: tail }],
        max_tokens: 12,
        temperature: 0,
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    let text = "";
    for await (const e of sseEvents(res)) {
      if (e.data === "[DONE]") break;
      text += JSON.parse(e.data).choices[0]?.delta?.content ?? "";
    }
    return text;
  }

  test("every output equals its solo run; no page leaks; the cache stays within its budget", async () => {
    const baseline = await health(server.url);
    expect(baseline.kv.used_pages).toBe(0);
    const solo: string[] = [];
    for (const t of tails) solo.push(await streamChat(t));
    const together = await Promise.all(tails.map((t) => streamChat(t)));
    tails.forEach((t, i) => expect(together[i], t).toBe(solo[i]));

    const h = await waitForHealth(server.url, (h) => h.running === 0 && h.kv.used_pages === 0);
    const pc = h.prefix_cache;
    expect(pc.budget_bytes).toBeLessThanOrEqual(budget);
    expect(pc.pages).toBeGreaterThan(0);
    expect(pc.pages * h.kv.bytes_per_page).toBeLessThanOrEqual(pc.budget_bytes);
    expect(pc.hits).toBeGreaterThan(0);
    expect(h.kv.cached_pages).toBe(pc.pages);
    expect(h.kv.free_pages + h.kv.cached_pages).toBe(h.kv.total_pages);
  });
});

describe("--prefix-cache-bytes 0", () => {
  let server: RunningServer;
  beforeAll(async () => {
    server = await startServer(["--context-window", "512", "--prefix-cache-bytes", "0"]);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("turns the cache off: a repeated prompt reads nothing from it", async () => {
    expect(server.log()).toMatch(/prefix cache {4}off/);
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: "x", maxRetries: 0 });
    const ask = () =>
      anthropic.messages.create({
        model: MODEL,
        max_tokens: 4,
        temperature: 0,
        messages: [{ role: "user", content: `Explain:\n${sourceText(300)}` }],
      } as Anthropic.MessageCreateParamsNonStreaming);
    const a = await ask();
    const b = await ask();
    expect(b.usage.cache_read_input_tokens).toBe(0);
    expect(b.usage.input_tokens).toBe(a.usage.input_tokens);
    const h = await health(server.url);
    expect(h.prefix_cache).toMatchObject({ enabled: false, pages: 0, hits: 0, budget_bytes: 0 });
    expect(h.kv.cached_pages).toBe(0);
    expect(metric(await metrics(server.url), "flint_prefix_cache_hits_total")).toBe(0);
  });

  test("cache_control on system, content blocks and tools is accepted (caching is automatic)", async () => {
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: "x", maxRetries: 0 });
    const mark = { cache_control: { type: "ephemeral" as const } };
    const r = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 2,
      system: [{ type: "text", text: "You use tools.", ...mark }],
      tools: [{ name: "ls", description: "List files", input_schema: { type: "object" }, ...mark }],
      messages: [
        { role: "user", content: [{ type: "text", text: "List the files.", ...mark }] },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "ls", input: {}, ...mark }] },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a.py", ...mark }],
        },
      ],
    });
    expect(r.type).toBe("message");
    expect(r.usage.cache_creation_input_tokens).toBe(0);
  });
});

describe("the disk tier across a restart", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await Deno.makeTempDir({ prefix: "flint_prefix_server_" });
  });
  afterAll(async () => {
    await Deno.remove(dir, { recursive: true });
  });
  const ask = (url: string) =>
    new OpenAI({ baseURL: `${url}/v1`, apiKey: "x", maxRetries: 0 }).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: `Explain:\n${sourceText(900)}` }],
      max_tokens: 6,
      temperature: 0,
    });

  test("a restarted server's first request reads its prefix from disk; a q8 server does not", async () => {
    const args = ["--context-window", "1024", "--max-batch", "2", "--prefix-cache-dir", dir];
    let server = await startServer(args);
    let first: OpenAI.ChatCompletion;
    try {
      first = await ask(server.url);
      expect(first.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
      // Pages are written once the server has been idle for a second.
      const h = await waitForHealth(server.url, (h) => h.prefix_cache.disk.bytes > 0, 60_000);
      expect(h.prefix_cache.disk.dir).toContain(dir);
    } finally {
      await server.stop();
    }
    server = await startServer(args);
    try {
      const again = await ask(server.url);
      const cached = again.usage!.prompt_tokens_details!.cached_tokens!;
      expect(cached).toBe(16 * Math.floor((again.usage!.prompt_tokens - 1) / 16));
      expect(again.choices[0].message.content).toBe(first.choices[0].message.content);
      expect((await health(server.url)).prefix_cache.tokens_loaded).toBe(cached);
    } finally {
      await server.stop();
    }
    server = await startServer([...args, "--kv-cache", "q8"]);
    try {
      expect((await ask(server.url)).usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    } finally {
      await server.stop();
    }
  });
});

/**
 * What agent clients meet first, over real HTTP: the server answers /health and sends SSE headers while
 * the GPU reads a long prompt (the engine runs in a worker), a client's large max_tokens is clamped to the
 * room the window leaves instead of refused, /events follows one request (with estimated progress inside a
 * chunk), prompts that cannot fit are refused before tokenizing, and the edges: pages without the API key,
 * CORS, strict model names, GET /v1/models/{id}, a truncated body, a busy port.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ROOT } from "../util/fixtures.ts";
import { type RunningServer, sseEvents, startServer } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
const KEY = "k-agent";
const CTX = 1024;
const ORIGIN = "http://page.example";
let server: RunningServer;

beforeAll(async () => {
  server = await startServer([
    "--context-window",
    String(CTX),
    "--max-batch",
    "2",
    "--api-key",
    KEY,
    "--cors",
    ORIGIN,
    "--strict-model-name",
    "--alias",
    "claude-*",
    // Keep-alives often enough that any prefill on a software adapter spans several.
    "--keep-alive-s",
    "0.1",
  ]);
});
afterAll(async () => {
  await server?.stop();
});

const auth = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
/** A Python-looking prompt of about `n` tokens that the model continues without stopping. */
const code = (n: number) =>
  Array.from({ length: Math.ceil(n / 12) }, (_, i) => `    total_${i} = compute(values[${i}], ${i})`).join(
    "\n",
  );

/** /health with a deadline (the server must answer while the GPU works; this is not a timing check). */
async function health(): Promise<any> {
  const r = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(30_000) });
  return await r.json();
}

describe("a long prompt does not block the server", () => {
  test(
    "SSE headers come at once, /health and /events answer during the prefill, " +
      "max_tokens is clamped",
    async () => {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: "user", content: `def run(values):\n${code(900)}` }],
          max_tokens: 32000,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        }),
      });
      expect(res.status).toBe(200);
      const id = res.headers.get("flint-sequence-id")!;
      // One request's events only, with estimates between the chunk's start and its end.
      const feed = await fetch(`${server.url}/events?id=${id}`, { headers: auth });
      const events: any[] = [];
      const feedDone = (async () => {
        for await (const e of sseEvents(feed)) {
          const x = JSON.parse(e.data);
          events.push(x);
          if (x.type === "finish") break;
        }
      })();
      // /health answers before the first token exists (the prompt is one 2048-row chunk on the GPU).
      let first = "";
      const healthDuring: any[] = [];
      const polling = (async () => {
        while (!first) {
          const h = await health();
          if (!first) healthDuring.push(h);
          await new Promise((r) => setTimeout(r, 200));
        }
      })();
      let usage: any = null;
      let finish = "";
      for await (const e of sseEvents(res)) {
        if (e.data === "[DONE]") break;
        const x = JSON.parse(e.data);
        const c = x.choices?.[0];
        if (c?.delta?.content) first ||= c.delta.content;
        if (c?.finish_reason) finish = c.finish_reason;
        if (x.usage) usage = x.usage;
      }
      first ||= "(none)";
      await polling;
      await feedDone;
      expect(healthDuring.some((h) => h.running === 1 && h.kv.used_pages > 0)).toBe(true);
      expect(usage.prompt_tokens).toBeGreaterThan(800);
      // 32000 asked, the room left given: the reply runs to the end of the window.
      expect(finish).toBe("length");
      expect(usage.prompt_tokens + usage.completion_tokens).toBe(CTX);
      expect(events[0].type).toBe("ready");
      expect(events.slice(1).every((x) => x.id === Number(id))).toBe(true);
      const estimated = events.filter((x) => x.type === "prefill" && x.estimated);
      expect(estimated.length).toBeGreaterThan(0);
      for (const x of estimated) expect(x.processed > 0 && x.processed < x.total).toBe(true);
      const shown = estimated.map((x) => x.processed);
      expect(shown).toEqual([...shown].sort((a, b) => a - b));
      expect(events.filter((x) => x.type === "prefill" && !x.estimated).at(-1).processed).toBe(
        usage.prompt_tokens,
      );
    },
  );

  test(
    "Anthropic, as Claude Code asks: pings while the prompt is read, " +
      "max_tokens 32000 clamped",
    async () => {
      const res = await fetch(`${server.url}/v1/messages?beta=true`, {
        method: "POST",
        headers: { ...auth, "anthropic-version": "2023-06-01" },
        body: JSON.stringify({
          model: "claude-opus-4-5",
          max_tokens: 32000,
          stream: true,
          messages: [{ role: "user", content: `def run(values):\n${code(850)}` }],
        }),
      });
      const names: string[] = [];
      let usage: any = {};
      let stop = "";
      for await (const e of sseEvents(res)) {
        names.push(e.event!);
        const x = JSON.parse(e.data);
        if (x.type === "message_start") usage = { ...x.message.usage };
        if (x.type === "message_delta") {
          usage.output_tokens = x.usage.output_tokens;
          stop = x.delta.stop_reason;
        }
      }
      const firstDelta = names.indexOf("content_block_delta");
      expect(names[0]).toBe("message_start");
      // The prefill spans several 0.1 s keep-alives on a software GPU.
      expect(names.slice(0, firstDelta)).toContain("ping");
      expect(usage.input_tokens + usage.output_tokens).toBeLessThanOrEqual(CTX);
      if (stop === "max_tokens") expect(usage.input_tokens + usage.output_tokens).toBe(CTX);
      const anthropic = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
      const e = await anthropic.messages.create({
        model: "claude-local",
        max_tokens: 8,
        messages: [{ role: "user", content: code(1400) }],
      }).catch((x) => x);
      expect(e).toBeInstanceOf(Anthropic.BadRequestError);
      expect(e.message).toMatch(new RegExp(`prompt is too long: \\d+ tokens > ${CTX - 1} maximum`));
    },
  );

  test(
    "overflow errors in the words each client matches; " +
      "an unfixable one in words no client retries",
    async () => {
      const post = (messages: unknown[]) =>
        fetch(`${server.url}/v1/chat/completions`, {
          method: "POST",
          headers: auth,
          body: JSON.stringify({ model: MODEL, messages, max_tokens: 8 }),
        }).then(async (r) => ({ status: r.status, error: (await r.json()).error }));
      // Long history, short last message: compacting would help. Codex reads the code, pi and opencode the
      // text.
      const history = Array.from({ length: 6 }, (_, i) => [
        { role: "user", content: code(200) },
        { role: "assistant", content: `step ${i} done` },
      ]).flat();
      const a = await post([{ role: "system", content: "You are terse." }, ...history, {
        role: "user",
        content: "next",
      }]);
      expect(a.status).toBe(400);
      expect(a.error.code).toBe("context_length_exceeded");
      expect(a.error.message).toMatch(/exceeds the context window/i);
      // The last message alone is over the window: no compaction can help, so nothing may read as an overflow
      // (opencode would compact and resend forever). Its patterns, from its source:
      const b = await post([{ role: "user", content: "ok" }, { role: "assistant", content: "ok" }, {
        role: "user",
        content: code(1400),
      }]);
      expect(b.status).toBe(400);
      expect(b.error.code).toBe("prompt_exceeds_window");
      for (
        const re of [
          /prompt is too long/i,
          /exceeds the context window/i,
          /maximum context length/i,
          /too many tokens/i,
          /context[_ ]length[_ ]exceeded/i,
          /request_too_large/i,
          /token limit exceeded/i,
          /greater than the context length/i,
        ]
      ) {
        expect(b.error.message).not.toMatch(re);
      }
    },
  );

  test(
    "a 30 MB prompt is refused from its length, before tokenizing; " +
      "count_tokens runs beside /health",
    async () => {
      const huge = "x = 1; ".repeat(4_200_000); // 29.4 MB, under the 32 MB body limit
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: huge }], max_tokens: 4 }),
      });
      expect(res.status).toBe(400);
      const body = await res.json();
      // One message: compacting cannot help, so not an overflow code; counted from its length ("at least").
      expect(body.error.code).toBe("prompt_exceeds_window");
      expect(body.error.message).toMatch(/alone take at least \d+ tokens/);
      // Counting a 2 MB prompt takes the prompt worker seconds; the HTTP thread answers meanwhile.
      const counting = fetch(`${server.url}/v1/messages/count_tokens`, {
        method: "POST",
        headers: { ...auth, "anthropic-version": "2023-06-01" },
        body: JSON.stringify({
          model: "claude-x",
          messages: [{ role: "user", content: "x = 1\n".repeat(350_000) }],
        }),
      });
      expect((await health()).status).toBe("ok");
      const counted = await (await counting).json();
      expect(counted.input_tokens).toBeGreaterThan(350_000);
    },
  );
});

describe("edges clients hit", () => {
  test("pages open without the API key; the API needs it", async () => {
    for (const path of ["/", "/lab"]) {
      const r = await fetch(`${server.url}${path}`);
      expect(r.status, path).toBe(200);
      expect(r.headers.get("content-type")).toContain("text/html");
      await r.body?.cancel();
    }
    const r = await fetch(`${server.url}/v1/models`);
    expect(r.status).toBe(401);
    expect((await r.json()).error.code).toBe("invalid_api_key");
  });

  test("CORS for the configured origin only", async () => {
    const pre = await fetch(`${server.url}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: {
        origin: ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization",
      },
    });
    expect(pre.status).toBeLessThan(300);
    expect(pre.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    await pre.body?.cancel();
    const get = await fetch(`${server.url}/v1/models`, { headers: { ...auth, origin: ORIGIN } });
    expect(get.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    await get.body?.cancel();
    // A 401 also carries them, so a page on that origin can see it must ask for the key.
    const noKey = await fetch(`${server.url}/v1/models`, { headers: { origin: ORIGIN } });
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    await noKey.body?.cancel();
    const other = await fetch(`${server.url}/v1/models`, {
      headers: { ...auth, origin: "http://evil.example" },
    });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    await other.body?.cancel();
  });

  test("strict model names: the served name and aliases pass, others are 404; /v1/models/{id}", async () => {
    const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
    expect((await openai.models.retrieve(MODEL)).id).toBe(MODEL);
    const miss = await openai.models.retrieve("gpt-4o").catch((e) => e);
    expect(miss).toBeInstanceOf(OpenAI.NotFoundError);
    const e = await openai.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "hi" }],
    })
      .catch((x) => x);
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect(e.code).toBe("model_not_found");
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
    const ok = await anthropic.messages.create({
      model: "claude-x",
      max_tokens: 2,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(ok.model).toBe(MODEL);
  });

  test("a body shorter than its content-length is a 400, and the server keeps serving", async () => {
    const { hostname, port } = new URL(server.url);
    const conn = await Deno.connect({ hostname, port: Number(port) });
    const body = '{"model": "x", "messages": [';
    const head =
      `POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${KEY}\r\n` +
      `content-type: application/json\r\ncontent-length: 1000\r\n\r\n`;
    await conn.write(new TextEncoder().encode(head + body));
    await conn.closeWrite();
    let reply = "";
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      reply += new TextDecoder().decode(buf.subarray(0, n));
    }
    conn.close();
    expect(reply).toMatch(/^HTTP\/1\.1 400/);
    expect(reply).toContain("ended early");
    expect((await health()).status).toBe("ok");
  });
});

test("a busy port is one clear line, before any model is loaded", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (taken.addr as Deno.NetAddr).port;
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${ROOT}src/cli/serve.ts`, "--port", String(port)],
      env: { XDG_RUNTIME_DIR: "/tmp" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    expect(out.code).not.toBe(0);
    expect(text).toContain(`127.0.0.1:${port} is already in use`);
    expect(text).not.toContain("loading");
    expect(text).not.toMatch(/\n\s+at /); // no stack trace
  } finally {
    taken.close();
  }
});

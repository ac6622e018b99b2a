/**
 * Bad input never crashes or wedges the server: each row of the table (bad_input_cases.ts) is sent over
 * HTTP and must get its 4xx with an OpenAI- or Anthropic-shaped error body; /health must answer after every
 * one, and a normal request must still be served at the end.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { C, type Case, CASES, chat } from "./bad_input_cases.ts";
import { health, type RunningServer, startServer } from "./server_util.ts";

const KEY = "k-bad-input";
let server: RunningServer;

beforeAll(async () => {
  server = await startServer([
    "--context-window",
    "256",
    "--max-batch",
    "2",
    "--api-key",
    KEY,
    "--max-body-mb",
    "1",
  ]);
});
afterAll(async () => {
  await server?.stop();
});

type Flavor = "openai" | "anthropic";

async function send(c: Case): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json", ...c.headers };
  if (c.auth !== false) headers.authorization = `Bearer ${KEY}`;
  let body: BodyInit | undefined;
  if (c.body instanceof Uint8Array) body = c.body as Uint8Array<ArrayBuffer>;
  else if (typeof c.body === "string") body = c.body;
  else if (c.body !== undefined) body = JSON.stringify(c.body);
  return await fetch(`${server.url}${c.path}`, { method: c.method ?? "POST", headers, body });
}

describe(`bad input: ${CASES.length} cases`, () => {
  test("the table has at least 30 cases", () => {
    expect(CASES.length).toBeGreaterThanOrEqual(30);
  });

  for (const c of CASES) {
    test(`${c.name} → ${c.status}`, async () => {
      const res = await send(c);
      const text = await res.text();
      expect(res.status, text).toBe(c.status);
      const body = JSON.parse(text);
      const flavor: Flavor = c.path.startsWith("/v1/messages") ? "anthropic" : "openai";
      let message: string;
      if (flavor === "anthropic") {
        expect(body.type).toBe("error");
        expect(typeof body.error.type).toBe("string");
        message = body.error.message;
        if (c.code) expect(body.error.type).toBe(c.code);
      } else {
        expect(typeof body.error.type).toBe("string");
        expect(body.error).toHaveProperty("code");
        message = body.error.message;
        if (c.code) expect(body.error.code).toBe(c.code);
      }
      expect(typeof message).toBe("string");
      if (c.says) expect(message).toContain(c.says);
      // Still healthy, and nothing left holding KV pages or the model.
      const h = await health(server.url);
      expect(h.status).toBe("ok");
      expect(h.kv.used_pages).toBe(0);
      expect(h.in_flight).toBe(0);
    });
  }

  test("/health needs no key; a normal request is served after all of the above", async () => {
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    const res = await send({
      name: "ok",
      path: C,
      body: chat({ max_tokens: 3, temperature: 0 }),
      status: 200,
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.usage.completion_tokens).toBe(3);
    expect(server.log()).not.toMatch(/Uncaught|panicked/);
  });
});

/**
 * Continuous batching is invisible in greedy output: 8 streaming requests sent at once give the same text
 * as the same 8 sent one by one. /events proves they really overlapped (all started before any finished).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type RunningServer, sseEvents, startServer } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
let server: RunningServer;

beforeAll(async () => {
  server = await startServer(["--context-window", "512", "--max-batch", "8"]);
});
afterAll(async () => {
  await server?.stop();
});

const PROMPTS = [
  "Write a python function that adds two numbers.",
  "def fibonacci(n):",
  "Explain what a linked list is.",
  "import numpy as np\n",
  "Write a bash script that counts files.",
  "class Stack:",
  "How do I reverse a string in JavaScript?",
  "SELECT * FROM",
];

/** One streaming chat request; returns the concatenated text and the usage it reported. */
async function streamChat(content: string): Promise<{ text: string; usage: any }> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content }],
      max_tokens: 16,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  expect(res.status).toBe(200);
  let text = "";
  let usage = null;
  for await (const e of sseEvents(res)) {
    if (e.data === "[DONE]") break;
    const chunk = JSON.parse(e.data);
    if (chunk.usage) usage = chunk.usage;
    text += chunk.choices[0]?.delta?.content ?? "";
  }
  return { text, usage };
}

describe("continuous batching", () => {
  test("8 parallel greedy streams equal the same requests one by one", async () => {
    const alone: { text: string; usage: any }[] = [];
    for (const p of PROMPTS) alone.push(await streamChat(p));

    // Watch the scheduler while the parallel run happens.
    const ev = await fetch(`${server.url}/events`);
    const seen: any[] = [];
    const reader = (async () => {
      for await (const e of sseEvents(ev)) {
        const x = JSON.parse(e.data);
        seen.push(x);
        if (seen.filter((s) => s.type === "finish").length === PROMPTS.length) return;
      }
    })();
    while (!seen.length) await new Promise((r) => setTimeout(r, 20)); // the feed's "ready" event
    const together = await Promise.all(PROMPTS.map((p) => streamChat(p)));
    await reader;

    for (let i = 0; i < PROMPTS.length; i++) {
      expect(together[i].text, `prompt ${i}`).toBe(alone[i].text);
      // The second time, a prompt's full pages come from the prefix cache; only that count differs.
      expect({ ...together[i].usage, prompt_tokens_details: null })
        .toEqual({ ...alone[i].usage, prompt_tokens_details: null });
      expect(alone[i].usage.completion_tokens).toBeGreaterThan(0);
    }
    const order = seen.filter((s) => s.type === "start" || s.type === "finish").map((s) => s.type);
    expect(order.indexOf("finish")).toBe(PROMPTS.length); // every start came before the first finish
  });
});

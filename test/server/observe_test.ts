/**
 * What operators and clients watch: /events prefill progress for a long prompt, /metrics as Prometheus
 * text (checked with a real parser), /health, `--max-batch` making extra requests queue, and /admin/load
 * swapping the model (in-flight requests drain first; a failed load leaves the old model serving).
 */
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { DEFAULT_MODEL } from "../util/fixtures.ts";
import { health, type RunningServer, sseEvents, startServer, waitForHealth } from "./server_util.ts";

const MODEL = "flint-coder-19m-mlx-4bit";
let server: RunningServer;
let modelsDir: string;

beforeAll(async () => {
  // A models directory with the bundled model (symlinked) and a broken one.
  modelsDir = await Deno.makeTempDir({ prefix: "flint-models-" });
  await Deno.symlink(DEFAULT_MODEL, `${modelsDir}/${MODEL}`);
  await Deno.mkdir(`${modelsDir}/broken`);
  await Deno.writeTextFile(`${modelsDir}/broken/config.json`, "{ this is not json");
  server = await startServer([
    "--context-window",
    "1024",
    "--max-batch",
    "2",
    "--prefill-chunk",
    "32",
    "--models-dir",
    modelsDir,
  ]);
});
afterAll(async () => {
  await server?.stop();
  await Deno.remove(modelsDir, { recursive: true });
});

function post(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
}
const chat = (content: string, max_tokens: number) =>
  post("/v1/chat/completions", {
    model: MODEL,
    messages: [{ role: "user", content }],
    max_tokens,
    temperature: 0,
  });

describe("observability", () => {
  test("/events shows prefill progress chunk by chunk for a long prompt", async () => {
    const ac = new AbortController();
    const res = await fetch(`${server.url}/events`, { signal: ac.signal });
    const events: any[] = [];
    let sent: Promise<Response> | null = null;
    for await (const e of sseEvents(res)) {
      const x = JSON.parse(e.data);
      events.push(x);
      if (x.type === "ready") {
        sent = chat(Array.from({ length: 12 }, (_, i) => `x${i} = ${i} * ${i}`).join("\n"), 2);
      }
      if (x.type === "finish") break;
    }
    ac.abort();
    const body = await (await sent!).json();
    const start = events.find((x) => x.type === "start");
    const prefill = events.filter((x) => x.type === "prefill" && x.id === start.id && !x.estimated);
    const total = body.usage.prompt_tokens;
    expect(start.promptTokens).toBe(total);
    expect(total).toBeGreaterThan(64);
    expect(prefill.length).toBe(Math.ceil(total / 32));
    expect(prefill.map((p) => p.processed)).toEqual(prefill.map((_, i) => Math.min(32 * (i + 1), total)));
    expect(prefill.every((p) => p.total === total)).toBe(true);
    const fin = events.find((x) => x.type === "finish");
    expect(fin).toMatchObject({ id: start.id, reason: "length", completionTokens: 2 });
  });

  test("/metrics parses as Prometheus text and counts what happened", async () => {
    const res = await fetch(`${server.url}/metrics`);
    expect(res.headers.get("content-type")).toContain("text/plain");
    const families = parsePrometheusTextFormat(await res.text());
    const byName = new Map(families.map((f: any) => [f.name, f]));
    for (
      const [name, type] of [
        ["flint_requests_total", "COUNTER"],
        ["flint_prompt_tokens_total", "COUNTER"],
        ["flint_completion_tokens_total", "COUNTER"],
        ["flint_time_to_first_token_seconds", "HISTOGRAM"],
        ["flint_prefill_tokens_per_second", "HISTOGRAM"],
        ["flint_decode_tokens_per_second", "HISTOGRAM"],
        ["flint_kv_pages_used", "GAUGE"],
        ["flint_queue_depth", "GAUGE"],
      ]
    ) expect((byName.get(name) as any)?.type, name).toBe(type);
    const chatReqs = (byName.get("flint_requests_total") as any).metrics
      .filter((m: any) => m.labels.route === "/v1/chat/completions" && m.labels.status === "200");
    expect(Number(chatReqs[0].value)).toBeGreaterThanOrEqual(1);
    const ttft = (byName.get("flint_time_to_first_token_seconds") as any).metrics[0];
    expect(Number(ttft.count)).toBeGreaterThanOrEqual(1);
    expect(Number((byName.get("flint_completion_tokens_total") as any).metrics[0].value))
      .toBeGreaterThanOrEqual(2);
  });

  test("/health reports model, window, KV, queue and cpu_split", async () => {
    const h = await health(server.url);
    expect(h).toMatchObject({
      status: "ok",
      model: MODEL,
      context_window: 1024,
      queue_depth: 0,
      cpu_split: null,
    });
    expect(h.kv.used_pages).toBe(0);
    expect(h.kv.total_pages).toBeGreaterThan(0);
  });

  test("--max-batch 2 bounds the batch: a third request queues, and all three finish", async () => {
    const reqs = [0, 1, 2].map(() => chat("Write a python class for a bank account with many methods.", 24));
    const h = await waitForHealth(server.url, (h) => h.queue_depth > 0);
    expect(h.running).toBeLessThanOrEqual(2);
    const done = await Promise.all(reqs.map(async (r) => (await r).json()));
    expect(done.map((d) => d.usage.completion_tokens)).toEqual([24, 24, 24]);
    expect(done[1].choices[0].message.content).toBe(done[0].choices[0].message.content);
  });
});

describe("/admin/load", () => {
  test("swaps the model after in-flight requests drain", async () => {
    const inflight = chat("Write a python class for a bank account with many methods.", 24);
    await waitForHealth(server.url, (h) => h.running > 0);
    const swap = await post("/admin/load", { model: MODEL, context_window: 512 });
    const body = await swap.json();
    expect(swap.status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ status: "ok", model: MODEL, context_window: 512 });
    // The request that was running when the swap came in finished normally on the old model.
    const r = await (await inflight).json();
    expect(r.usage.completion_tokens).toBe(24);
    expect((await health(server.url)).context_window).toBe(512);
    const after = await chat("def add(a, b):", 3);
    expect(after.status).toBe(200);
  });

  test("a model that fails to load leaves the old one serving", async () => {
    const bad = await post("/admin/load", { model: "broken" });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.message).toContain("config.json");
    expect(await health(server.url)).toMatchObject({ status: "ok", model: MODEL, context_window: 512 });
    const r = await chat("def add(a, b):", 3);
    expect(r.status).toBe(200);
    expect((await r.json()).usage.completion_tokens).toBe(3);
  });

  test("names outside the models directory are refused", async () => {
    for (const model of ["../", "/etc", "a/../../x"]) {
      expect((await post("/admin/load", { model })).status).toBe(403);
    }
  });
});

/**
 * An agent session replayed with the prefix cache off and on, in one run: a fixed system prompt (tool JSON
 * schemas and instructions, ~8k tokens), then turns that each append a tool result or user message of
 * 0.5–3k tokens plus the assistant's previous reply and generate 128 tokens; then, cache on, one 16k-token
 * prompt sent cold, warm (pages in memory) and warm from disk. Text comes from a seed: the same every run.
 *   deno run -A bench/agent_session.ts [--model DIR|default] [--synthetic NAME] [--kv-budget-gb N]
 *     [--turns 10] [--system-tokens 8000] [--turn-tokens 500-3000] [--max-tokens 128]
 *     [--warm-tokens 16384] [--passes off,on] [--context-window N] [--port 0] [--seed 1] [--out FILE]
 * Each pass starts `src/cli/serve.ts` (`--prefix-cache-bytes 0`, then the default budget with a fresh
 * `--prefix-cache-dir`) and streams chat completions from it. --synthetic NAME serves random weights of that
 * shape (`serve.ts --synthetic NAME --kv-budget-gb 8` unless --kv-budget-gb is given: the 4B shape needs ~8
 * for a 31.7k context); --model is then the tokenizer's folder. "From disk": once the server has
 * written its cached pages (/health's prefix_cache.disk.bytes steady), it is stopped and a new one started on
 * the same folder gets a short unrelated prompt (its first request builds kernels), then the 16k prompt.
 * Tools travel as text in the system message (as Hermes templates render them), so replies stay plain text
 * and each turn's prompt extends the last. The server has no ignore_eos: a reply may end before max_tokens
 * (the completion column says); both passes generate the same text, so they stay comparable.
 * @module
 */
import { parseFlags } from "../src/cli/args.ts";
import { SyntheticModelSource } from "../src/loader/synthetic.ts";
import { Tokenizer } from "../src/loader/tokenizer.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../src/platform/deno.ts";
import type { Turn } from "../src/server/prompt.ts";
import { fill, rng, systemPrompt, Text, turnMessage } from "./agent_text.ts";
import { sseBlocks, startServe } from "./serve_process.ts";

const f = parseFlags(Deno.args, {
  model: "string",
  synthetic: "string",
  "kv-budget-gb": "number",
  turns: "number",
  "system-tokens": "number",
  "turn-tokens": "string",
  "max-tokens": "number",
  "warm-tokens": "number",
  passes: "string",
  "context-window": "number",
  port: "number",
  seed: "number",
  out: "string",
});
const turns = f.turns ?? 10;
const systemTokens = f["system-tokens"] ?? 8000;
const [lo, hi] = (f["turn-tokens"] ?? "500-3000").split("-").map(Number);
const maxTokens = f["max-tokens"] ?? 128;
const warmTokens = f["warm-tokens"] ?? 16384;
const passes = (f.passes ?? "off,on").split(",") as ("off" | "on")[];
const seed = f.seed ?? 1;
const modelDir = !f.model || f.model === "default" ? DEFAULT_MODEL_DIR : f.model;
if (!(lo > 0 && hi >= lo) || passes.some((p) => p !== "off" && p !== "on")) {
  throw new Error("--turn-tokens is MIN-MAX (e.g. 500-3000); --passes is off, on or off,on");
}

// ---- The server over HTTP ------------------------------------------------------------------------------

interface Reply {
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** Milliseconds from sending to the first streamed token, and to the end of the stream. */
  ttftMs: number;
  totalMs: number;
  text: string;
}
interface Server {
  url: string;
  send(turns: Turn[], maxTokens: number): Promise<Reply>;
  close(): Promise<void>;
}
const n0 = (x: number | undefined) => (x === undefined ? "–" : Math.round(x).toLocaleString("en-US"));

/** `serve.ts` on `dir` as its disk tier ("none": none), with the cache on or off; resolves once listening. */
async function startServer(cache: boolean, ctx: number, dir: string): Promise<Server> {
  const args = ["--model", modelDir, "--context-window", String(ctx)];
  args.push("--port", String(f.port ?? 0), "--keep-alive-s", "30", "--prefix-cache-dir", dir);
  if (f.synthetic) args.push("--synthetic", f.synthetic, "--kv-budget-gb", String(f["kv-budget-gb"] ?? 8));
  else if (f["kv-budget-gb"] !== undefined) args.push("--kv-budget-gb", String(f["kv-budget-gb"]));
  if (!cache) args.push("--prefix-cache-bytes", "0");
  const server = await startServe(args);
  const url = server.url;
  const pc = /prefix cache +(.*)/.exec(server.banner)?.[1] ?? "(not in the banner)";
  console.log(`  server at ${url}; prefix cache ${pc}`);
  return {
    url,
    async send(turns, max) {
      const t0 = performance.now();
      const body = { model: "bench", messages: turns, max_tokens: max, temperature: 0, stream: true };
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...body, stream_options: { include_usage: true } }),
      });
      if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
      let ttftMs = 0;
      let text = "";
      let usage: any = {};
      for await (const block of sseBlocks(res)) {
        if (!block.startsWith("data: ") || block === "data: [DONE]") continue;
        const x = JSON.parse(block.slice(6));
        const d = x.choices?.[0]?.delta ?? {};
        if ((d.content || d.reasoning_content || d.tool_calls) && !ttftMs) ttftMs = performance.now() - t0;
        text += d.content ?? "";
        if (x.usage) usage = x.usage;
      }
      const totalMs = performance.now() - t0;
      const [promptTokens, completionTokens] = [usage.prompt_tokens ?? 0, usage.completion_tokens ?? 0];
      const cachedTokens = usage.prompt_tokens_details?.cached_tokens ?? 0;
      return { promptTokens, cachedTokens, completionTokens, text, ttftMs: ttftMs || totalMs, totalMs };
    },
    async close() {
      await server.stop();
    },
  };
}

/**
 * Waits until the server has written its cached pages to disk (it does once idle for 1 s): /health's
 * prefix_cache.disk.bytes polled every 500 ms, done when > 0 and unchanged for 3 polls; at most 120 s.
 */
async function diskWritten(url: string): Promise<{ bytes: number; waitMs: number; settled: boolean }> {
  const t0 = performance.now();
  let [bytes, same] = [-1, 0];
  while (performance.now() - t0 < 120_000) {
    const h = await (await fetch(`${url}/health`)).json();
    const b: number = h.prefix_cache?.disk?.bytes ?? 0;
    same = b === bytes ? same + 1 : 0;
    bytes = b;
    if (b > 0 && same >= 3) return { bytes, waitMs: performance.now() - t0, settled: true };
    await new Promise((r) => setTimeout(r, 500));
  }
  return { bytes: Math.max(bytes, 0), waitMs: performance.now() - t0, settled: false };
}

// ---- The session ---------------------------------------------------------------------------------------

const base = new DiskModelSource(modelDir);
const source = f.synthetic ? new SyntheticModelSource(f.synthetic, base) : base;
const tok = await Tokenizer.load(source);
const maxPosition: number = JSON.parse(await source.readText("config.json")).max_position_embeddings;
base.close();
const r = rng(seed);
const sizes = Array.from({ length: turns }, () => lo + Math.round((r() * (hi - lo)) / 50) * 50);
const text = new Text(r);
const system = systemPrompt(tok, text, systemTokens);
const messages = sizes.map((n, i) => turnMessage(tok, text, i, n));
const other = new Text(rng(seed + 7919));
const coldPrompt = "Review this repository's test output and say which failures share a cause.\n" +
  fill(tok, warmTokens, (k) => other.resultLine(k % 4, k + 1));
const sessionTokens = systemTokens + sizes.reduce((a, b) => a + b, 0) + turns * (maxTokens + 64);
// As long as the session's last prompt, so kernels for every depth are built before the timed turns.
const warmupPrompt = "Summarise this listing in one line.\n" +
  fill(tok, sessionTokens, (k) => other.resultLine(0, k + 1));
// The new server's first request, unrelated to the 16k prompt (no shared pages).
const brief = new Text(rng(seed + 31));
const firstPrompt = "Name one risk in this plan.\n" + fill(tok, 64, () => brief.prose());
const need = Math.max(sessionTokens, warmTokens) + 512;
const ctx = f["context-window"] ?? Math.min(maxPosition, Math.ceil(need / 1024) * 1024);
if (ctx < need) console.warn(`warning: the session needs ~${need} tokens; the context window is ${ctx}`);

/**
 * One pass: each turn's reply (text included, to compare the passes); with the cache on, the 16k prompt's
 * cold and warm sends, and the send to a new server after the pages were written to disk.
 */
interface Pass {
  turns: Reply[];
  wallMs: number;
  reusedTokens: number;
  cold?: Reply;
  warm?: Reply;
  disk?: Reply;
  /** The new server's first (untimed) request; the disk tier's bytes, whether they settled, the wait. */
  diskFirst?: Reply;
  diskBytes?: number;
  diskSettled?: boolean;
  diskWaitMs?: number;
}
async function session(server: Server, cache: boolean): Promise<Pass> {
  // Builds the step kernels; with the cache on, a second send runs a cache hit once before timing.
  for (let i = 0; i < (cache ? 2 : 1); i++) await server.send([{ role: "user", content: warmupPrompt }], 4);
  const convo: Turn[] = [{ role: "system", content: system }];
  const rows: Reply[] = [];
  const t0 = performance.now();
  for (let i = 0; i < turns; i++) {
    convo.push({ role: "user", content: messages[i] });
    const rep = await server.send(convo, maxTokens);
    convo.push({ role: "assistant", content: rep.text });
    rows.push(rep);
    const t = `TTFT ${rep.ttftMs.toFixed(0)} ms, total ${rep.totalMs.toFixed(0)} ms`;
    console.log(`  turn ${i + 1}: prompt ${rep.promptTokens}, cached ${rep.cachedTokens}, ${t}`);
  }
  const wallMs = performance.now() - t0;
  const out: Pass = { turns: rows, wallMs, reusedTokens: rows.reduce((a, x) => a + x.cachedTokens, 0) };
  if (cache) {
    out.cold = await server.send([{ role: "user", content: coldPrompt }], 1);
    out.warm = await server.send([{ role: "user", content: coldPrompt }], 1);
    console.log(`  long prompt: cold TTFT ${n0(out.cold.ttftMs)} ms, warm ${n0(out.warm.ttftMs)} ms`);
  }
  return out;
}

const results: Partial<Record<"off" | "on", Pass>> = {};
for (const pass of passes) {
  const cache = pass === "on";
  console.log(`[agent_session] pass "${pass}": prefix cache ${cache ? "on (default)" : "off"}`);
  // A fresh disk tier: pages an earlier run left in ~/.cache/flint/prefix would make "cold" prompts warm.
  const dir = cache ? await Deno.makeTempDir({ prefix: "flint-prefix-" }) : "none";
  let server: Server | null = null;
  try {
    server = await startServer(cache, ctx, dir);
    const p = results[pass] = await session(server, cache);
    if (cache) {
      const w = await diskWritten(server.url);
      [p.diskBytes, p.diskSettled, p.diskWaitMs] = [w.bytes, w.settled, w.waitMs];
      const how = w.settled ? "steady" : "still changing or 0 after 120 s";
      console.log(`  disk tier: ${n0(w.bytes)} bytes (${how}, waited ${n0(w.waitMs)} ms); restarting`);
      await server.close();
      server = await startServer(true, ctx, dir);
      p.diskFirst = await server.send([{ role: "user", content: firstPrompt }], 1);
      p.disk = await server.send([{ role: "user", content: coldPrompt }], 1);
      console.log(`  the same prompt from disk: TTFT ${n0(p.disk.ttftMs)} ms, cached ${p.disk.cachedTokens}`);
    }
  } finally {
    await server?.close();
    if (cache) await Deno.remove(dir, { recursive: true });
  }
}

// ---- Report --------------------------------------------------------------------------------------------

const { off, on } = results;
const label = `${f.synthetic ? `synthetic ${f.synthetic} (tokenizer of ${modelDir})` : modelDir} through ` +
  `src/cli/serve.ts over HTTP`;
const lines = [
  `Agent session: ${label}; system ${systemTokens} tokens, ${turns} turns of ${lo}–${hi} tokens, ` +
  `max_tokens ${maxTokens}, context window ${ctx}, seed ${seed}.`,
  "Method: wall clock (performance.now()) in this process around each streamed request; TTFT = request " +
  "start → first streamed token with text; total = → end of stream. Token counts: the server's usage.",
  "",
  "| turn | added | prompt | cached | TTFT off ms | TTFT on ms | total off ms | total on ms | completion " +
  "off/on | same reply |",
  "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
];
for (let i = 0; i < turns; i++) {
  const a = off?.turns[i];
  const b = on?.turns[i];
  const same = a && b ? (a.text === b.text ? "✓" : "✗") : "–";
  lines.push(
    `| ${i + 1} | ${n0(sizes[i])} | ${n0((b ?? a)?.promptTokens)} | ${n0(b?.cachedTokens)} | ` +
      `${n0(a?.ttftMs)} | ${n0(b?.ttftMs)} | ${n0(a?.totalMs)} | ${n0(b?.totalMs)} | ` +
      `${n0(a?.completionTokens)}/${n0(b?.completionTokens)} | ${same} |`,
  );
}
const speedup = off && on ? off.wallMs / on.wallMs : undefined;
lines.push(
  "",
  `Session wall time: without cache ${n0(off?.wallMs)} ms, with cache ${n0(on?.wallMs)} ms; tokens reused ` +
    `${n0(on?.reusedTokens)}; speedup ${speedup ? speedup.toFixed(2) + "×" : "–"}.`,
);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const ratio = on?.cold && on.warm ? on.warm.ttftMs / on.cold.ttftMs : undefined;
const diskRatio = on?.cold && on.disk ? on.disk.ttftMs / on.cold.ttftMs : undefined;
if (on?.cold && on.warm && ratio !== undefined) {
  const { cold, warm, disk } = on;
  const hit = (x: Reply) => `${n0(x.ttftMs)} ms (${n0(x.cachedTokens)} cached)`;
  lines.push(
    `Cold vs warm (${n0(cold.promptTokens)}-token prompt, cache on): TTFT cold ${n0(cold.ttftMs)} ms; ` +
      `warm in memory ${hit(warm)}, warm/cold ${pct(ratio)} (bar ≤ 5%: ${ratio <= 0.05 ? "✓" : "✗"})` +
      (disk && diskRatio !== undefined ? `; warm from disk ${hit(disk)}, disk/cold ${pct(diskRatio)}.` : "."),
  );
  if (!warm.cachedTokens) lines.push("Warning: the second send reported 0 cached tokens (no cache hit?).");
}
if (on?.disk) {
  const wait = `${on.diskSettled ? "" : "not steady after 120 s, "}waited ${n0(on.diskWaitMs)} ms`;
  lines.push(
    `From disk: the server wrote ${n0(on.diskBytes)} bytes of pages (${wait}) and was stopped; a new one ` +
      "on the same --prefix-cache-dir got a short unrelated prompt, then the prompt." +
      (on.disk.cachedTokens ? "" : " Warning: 0 cached tokens (no disk hit?)."),
  );
}
console.log(lines.join("\n"));
if (f.out) {
  const json = { command: Deno.args.join(" "), date: new Date().toISOString(), label, sizes, ctx, results };
  const figures = { speedup, warmColdRatio: ratio, diskColdRatio: diskRatio };
  await Deno.writeTextFile(f.out, JSON.stringify({ ...json, ...figures }, null, 1));
}
Deno.exit(0);

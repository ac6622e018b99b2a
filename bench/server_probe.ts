/**
 * The server under an agent's load, measured from outside over HTTP: it starts `src/cli/serve.ts`, sends a
 * long streamed prompt (an agent's resent context) and, while the GPU reads it, polls /health; it reports
 * when the stream's headers came, /health's latencies during the prefill, time to first token and the decode
 * rate the client sees.
 *   deno run -A bench/server_probe.ts [--model DIR] [--prompt-tokens 24000] [--max-tokens 256] [--out FILE]
 *     [--webgpu deno|dawn|auto] (passed to the server)
 * @module
 */
import { parseFlags } from "../src/cli/args.ts";
import { sseBlocks, startServe } from "./serve_process.ts";

const f = parseFlags(
  Deno.args,
  {
    model: "string",
    "prompt-tokens": "number",
    "max-tokens": "number",
    out: "string",
    webgpu: "string",
  } as const,
);
const args = ["--port", "0", "--keep-alive-s", "1"];
if (f.model) args.push("--model", f.model);
if (f.webgpu) args.push("--webgpu", f.webgpu);
const server = await startServe(args);
const { url, log } = server;

// About 12 tokens a line for the bundled tokenizer: the prompt is sized by lines, its real count comes back.
const lines = Math.ceil((f["prompt-tokens"] ?? 24000) / 12);
const prompt = Array.from({ length: lines }, (_, i) => `    total_${i} = compute(values[${i}], ${i})`).join(
  "\n",
);
const t0 = performance.now();
const res = await fetch(`${url}/v1/chat/completions`, {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({
    model: "probe",
    messages: [{ role: "user", content: `def run(values):\n${prompt}` }],
    max_tokens: f["max-tokens"] ?? 256,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  }),
});
const headersMs = performance.now() - t0;
let firstMs = 0;
let endMs = 0;
let usage: any = null;
let pings = 0;
const healthMs: number[] = [];
const poll = (async () => {
  while (!firstMs) {
    const h0 = performance.now();
    await (await fetch(`${url}/health`)).json();
    if (!firstMs) healthMs.push(performance.now() - h0);
    await new Promise((r) => setTimeout(r, 20));
  }
})();
for await (const block of sseBlocks(res)) {
  if (block.startsWith(": keep-alive")) pings++;
  if (!block.startsWith("data: ") || block === "data: [DONE]") continue;
  const x = JSON.parse(block.slice(6));
  if (x.choices?.[0]?.delta?.content && !firstMs) firstMs = performance.now() - t0;
  if (x.usage) usage = x.usage;
}
endMs = performance.now() - t0;
firstMs ||= endMs;
await poll;
await server.stop();

const sorted = [...healthMs].sort((a, b) => a - b);
const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
const result = {
  url,
  webgpu: server.banner.match(/WebGPU of (\w+)/)?.[1] ?? "?",
  promptTokens: usage?.prompt_tokens,
  completionTokens: usage?.completion_tokens,
  headersMs: Math.round(headersMs),
  ttftMs: Math.round(firstMs),
  prefillTps: Math.round((usage?.prompt_tokens ?? 0) / (firstMs / 1000)),
  decodeTps: Math.round(((usage?.completion_tokens ?? 1) - 1) / ((endMs - firstMs) / 1000)),
  healthDuringPrefill: { polls: healthMs.length, p50Ms: +q(0.5).toFixed(1), maxMs: +q(1).toFixed(1) },
  pingsBeforeFirstToken: pings,
  serverLog: log.join("").split("\n").filter((l) => l.startsWith("[flint] #")),
};
console.log(JSON.stringify(result, null, 2));
if (f.out) await Deno.writeTextFile(f.out, JSON.stringify(result, null, 2));

/**
 * Aggregate decode throughput with 1, 4, 8 concurrent streams through the real scheduler (continuous
 * batching), and whether each stream's greedy ids equal its solo run (batch invariance on this GPU).
 *   deno run -A bench/concurrency.ts [--synthetic NAME | --model DIR] [--streams 1,4,8] [--tokens 128]
 *     [--json F]
 * EOS is switched off so every stream makes its full token count.
 * @module
 */
import { Engine } from "../src/engine/engine.ts";
import { Scheduler } from "../src/engine/scheduler.ts";
import { parseFlags } from "../src/cli/args.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../src/platform/deno.ts";
import { SyntheticModelSource, syntheticWeightSource } from "../src/loader/synthetic.ts";

const f = parseFlags(Deno.args, {
  synthetic: "string",
  model: "string",
  streams: "string",
  tokens: "number",
  json: "string",
  prompt: "number",
});
const streams = (f.streams ?? "1,4,8").split(",").map(Number);
const tokens = f.tokens ?? 128;
const promptLen = f.prompt ?? 64;
const maxBatch = Math.max(...streams);
const base = new DiskModelSource(!f.model || f.model === "default" ? DEFAULT_MODEL_DIR : f.model);
const engine = f.synthetic
  ? await Engine.load(new SyntheticModelSource(f.synthetic, new DiskModelSource(DEFAULT_MODEL_DIR)), {
    weightSource: syntheticWeightSource(),
    maxBatch,
    contextWindow: 2048,
  })
  : await Engine.load(base, { maxBatch, contextWindow: 2048 });
engine.eosIds.length = 0;
engine.gpu.device.queue.writeBuffer(engine.slots.eos, 0, new Uint32Array([0]));
const V = engine.config.dims.vocab;
const prompts = Array.from(
  { length: maxBatch },
  (_, s) =>
    Array.from(
      { length: promptLen },
      (_, i) => 1 + ((Math.imul(i + 1, 2654435761) ^ Math.imul(s + 7, 40503)) >>> 0) % (V - 1),
    ),
);

const sched = new Scheduler(engine);
await sched.submit({ prompt: prompts[0], maxTokens: 8 }).result; // warm the batched plans' code paths
const solo: number[][] = [];
const rows: Record<string, unknown>[] = [];
for (const n of streams) {
  // Warm this stream count first: its step layouts (n decode rows, a prefill beside n − 1) build their plans
  // and compile any new kernel variants on first use, which would otherwise land inside the timed decode.
  await Promise.all(prompts.slice(0, n).map((p) => sched.submit({ prompt: p, maxTokens: 4 }).result));
  const t0 = performance.now();
  const results = await Promise.all(
    prompts.slice(0, n).map((p) => sched.submit({ prompt: p, maxTokens: tokens }).result),
  );
  const t1 = performance.now();
  if (n === 1 || !solo.length) {
    for (let i = 0; i < maxBatch; i++) {
      solo[i] ??= i < n
        ? results[i].tokenIds
        : (await sched.submit({ prompt: prompts[i], maxTokens: tokens }).result).tokenIds;
    }
  }
  const same = results.filter((r, i) => JSON.stringify(r.tokenIds) === JSON.stringify(solo[i])).length;
  // Decode phase: from the last stream's first token to the end (prefill of the others excluded).
  const firstDone = Math.max(...results.map((r) => r.ttftMs)) + t0;
  const decTokens = results.reduce((a, r) => a + r.completionTokens - 1, 0);
  const row = {
    streams: n,
    tokens_per_stream: tokens,
    wall_ms: Math.round(t1 - t0),
    aggregate_tps: Math.round((results.reduce((a, r) => a + r.completionTokens, 0) / (t1 - t0)) * 1000),
    decode_tps_median_stream: Math.round(
      results.map((r) => r.decodeTps).sort((a, b) => a - b)[Math.floor(n / 2)],
    ),
    aggregate_decode_tps: Math.round(decTokens / ((t1 - firstDone) / 1000)),
    same_as_solo: `${same}/${n}`,
  };
  rows.push(row);
  console.log(JSON.stringify(row));
}
const out = { model: engine.info.name, adapter: engine.gpu.info.adapter, promptLen, rows };
if (f.json) await Deno.writeTextFile(f.json, JSON.stringify(out, null, 1));
await sched.close();
Deno.exit(0);

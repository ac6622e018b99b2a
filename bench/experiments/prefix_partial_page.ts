/**
 * Experiment: does a prefix match that ends inside a page need a GPU page copy, or is recomputing from the
 * page boundary free? After a cached prefix of --depth tokens, times the warm prefill of k new tokens for
 * k = 1, 2, 4, 8, 16, 17, 32 (k − 1 of them would be saved by copying a partial page), best of 3.
 *   deno run -A bench/experiments/prefix_partial_page.ts [--synthetic qwen3-4b | --model DIR] [--depth 16384]
 * @module
 */
import { parseFlags } from "../../src/cli/args.ts";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { SyntheticModelSource, syntheticWeightSource } from "../../src/loader/synthetic.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../../src/platform/deno.ts";

const f = parseFlags(Deno.args, { synthetic: "string", model: "string", depth: "number" });
const depth = f.depth ?? 16384;
const base = new DiskModelSource(!f.model || f.model === "default" ? DEFAULT_MODEL_DIR : f.model);
const engine = f.synthetic
  ? await Engine.load(new SyntheticModelSource(f.synthetic, new DiskModelSource(DEFAULT_MODEL_DIR)), {
    weightSource: syntheticWeightSource(),
    maxBatch: 1,
    contextWindow: depth + 1024,
  })
  : await Engine.load(base, { maxBatch: 1, contextWindow: depth + 1024 });
const V = engine.config.dims.vocab;
const ps = engine.kv.shape.pageSize;
const ids = (n: number, seed: number) =>
  Array.from(
    { length: n },
    (_, i) => 1 + ((Math.imul(i + 1, 2654435761) ^ Math.imul(seed, 40503)) >>> 0) % (V - 1),
  );
const prefix = ids(depth, 1);
const sched = new Scheduler(engine);
const cold = await sched.submit({ prompt: [...prefix, 7], maxTokens: 1 }).result;
console.log(`${engine.info.name}: cold prefill of ${depth + 1} tokens, TTFT ${cold.ttftMs.toFixed(1)} ms`);
console.log("| new tokens k | recomputed rows | warm TTFT ms (best of 3) |");
console.log("|--:|--:|--:|");
for (const k of [1, 2, 4, 8, 16, 17, 32]) {
  let best = Infinity;
  let rows = 0;
  for (let rep = 0; rep < 3; rep++) {
    const r = await sched.submit({ prompt: [...prefix, ...ids(k, 100 + 10 * k + rep)], maxTokens: 1 }).result;
    best = Math.min(best, r.ttftMs);
    rows = r.promptTokens - r.cachedTokens;
  }
  console.log(`| ${k} | ${rows} | ${best.toFixed(1)} |`);
}
console.log(`(page size ${ps}: a match ending inside a page recomputes up to ${ps - 1} extra rows)`);
await sched.close();
engine.destroy();

/**
 * Experiment: where loading cached pages from disk spends its time (file read, checksum, upload), against
 * prefilling the same prompt. Prefills a --tokens prompt, writes its pages to a temporary folder, then a
 * new scheduler (empty memory cache) loads them for the same prompt.
 *   deno run -A bench/experiments/prefix_disk_load.ts [--synthetic qwen3-4b | --model DIR] [--tokens 16384]
 * @module
 */
import { parseFlags } from "../../src/cli/args.ts";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { SyntheticModelSource, syntheticWeightSource } from "../../src/loader/synthetic.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../../src/platform/deno.ts";
import { DiskPageFolder } from "../../src/platform/prefix_folder.ts";

const f = parseFlags(Deno.args, { synthetic: "string", model: "string", tokens: "number" });
const n = f.tokens ?? 16384;
const dir = !f.model || f.model === "default" ? DEFAULT_MODEL_DIR : f.model;
const engine = f.synthetic
  ? await Engine.load(new SyntheticModelSource(f.synthetic, new DiskModelSource(DEFAULT_MODEL_DIR)), {
    weightSource: syntheticWeightSource(),
    maxBatch: 1,
    contextWindow: n + 1024,
    kvBudget: 8 * 2 ** 30,
  })
  : await Engine.load(new DiskModelSource(dir), { maxBatch: 1, contextWindow: n + 1024 });
const V = engine.config.dims.vocab;
const prompt = Array.from({ length: n }, (_, i) => 1 + (Math.imul(i + 1, 2654435761) >>> 0) % (V - 1));
const root = await Deno.makeTempDir({ prefix: "flint_disk_load_" });
const tier = { folder: new DiskPageFolder(root), fingerprint: "experiment", budgetBytes: 64 * 2 ** 30 };
try {
  const a = new Scheduler(engine, { prefixFolder: tier });
  await a.submit({ prompt: prompt.slice(0, 64), maxTokens: 1 }).result; // compile
  const cold = await a.submit({ prompt, maxTokens: 1 }).result;
  let t0 = performance.now();
  await a.flushPrefixCache();
  const spillMs = performance.now() - t0;
  await a.close();
  const bytes = a.prefixStore!.bytes;
  a.prefixCache!.clear();
  const b = new Scheduler(engine, { prefixFolder: tier });
  await b.submit({ prompt: prompt.slice(0, 64).reverse(), maxTokens: 1 }).result;
  t0 = performance.now();
  const warm = await b.submit({ prompt, maxTokens: 1 }).result;
  const t = b.prefixStore!.loadTimes;
  console.log(`${engine.info.name}, ${n}-token prompt, ${(bytes / 2 ** 30).toFixed(2)} GiB of pages`);
  console.log(`cold prefill TTFT ${cold.ttftMs.toFixed(0)} ms; writing the pages ${spillMs.toFixed(0)} ms`);
  console.log(
    `from disk: TTFT ${warm.ttftMs.toFixed(0)} ms (${warm.cachedTokens} cached): read ${
      t.read.toFixed(0)
    } ms, ` +
      `checksum ${t.check.toFixed(0)} ms, upload ${t.upload.toFixed(0)} ms`,
  );
  await b.close();
  b.prefixCache!.clear();
} finally {
  await Deno.remove(root, { recursive: true });
  engine.destroy();
}

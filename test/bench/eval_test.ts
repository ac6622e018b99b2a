/**
 * `deno task eval` math on the bundled model: the sliding-window NLL equals a float64 log-softmax computed
 * here from `forwardLogits`; every token but the first is scored once; and the model finds its own greedy
 * continuation far more likely than the same tokens shuffled; int8 x on every 4-bit matmul changes the NLL
 * by under 2%.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { evaluateIds, int8XProfile, main, tokenNll } from "../../src/cli/eval.ts";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DEFAULT_MODEL } from "../util/fixtures.ts";

const TEXT =
  "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n";

const OPTS = { maxBatch: 1, contextWindow: 128, prefillChunk: 32, logitRows: 32 };
let engine: Engine;
beforeAll(async () => {
  engine = await Engine.load(new DiskModelSource(DEFAULT_MODEL), OPTS);
});
afterAll(() => engine?.destroy());

/** Independent reference: log-sum-exp with the max subtracted, all in float64, from one forward pass. */
async function referenceNll(ids: number[]): Promise<number> {
  const V = engine.config.dims.vocab;
  const logits = await engine.forwardLogits(ids);
  let total = 0;
  for (let t = 1; t < ids.length; t++) {
    const row = Array.from(logits.subarray((t - 1) * V, t * V), Number);
    const m = Math.max(...row);
    const lse = m + Math.log(row.reduce((a, x) => a + Math.exp(x - m), 0));
    total += lse - row[ids[t]];
  }
  return total / (ids.length - 1);
}

describe("eval: mean token NLL and perplexity", () => {
  test("int8 x on every 4-bit matmul (--int8-x all) moves the NLL a little, and only a little", async () => {
    const ids = engine.tokenizer!.encode(TEXT);
    const opts = { context: ids.length, stride: ids.length };
    const auto = await evaluateIds(engine, ids, opts);
    const e8 = await Engine.load(new DiskModelSource(DEFAULT_MODEL), {
      ...OPTS,
      gpuOptions: { profile: int8XProfile("all") },
    });
    try {
      const all = await evaluateIds(e8, ids, opts);
      expect(all.meanNll).not.toBe(auto.meanNll); // the int8 kernels ran
      expect(Math.abs(all.meanNll - auto.meanNll)).toBeLessThan(0.02 * auto.meanNll);
    } finally {
      e8.destroy();
    }
  });

  test("--int8-x takes auto, all or none", async () => {
    await expect(main(["--file", "README.md", "--int8-x", "some"])).rejects.toThrow(
      /--int8-x some: expected auto, all or none/,
    );
  });

  test("tokenNll on a hand-made row", () => {
    const row = new Float32Array([0, Math.log(3), 0]);
    expect(tokenNll(row, 1)).toBeCloseTo(Math.log(5 / 3), 6);
    expect(tokenNll(row, 0)).toBeCloseTo(Math.log(5), 6);
    expect(tokenNll(new Float32Array([1000, 0]), 0)).toBeCloseTo(0, 9); // no overflow
  });

  test("one window equals the float64 reference; sliding windows score every token once", async () => {
    const ids = engine.tokenizer!.encode(TEXT);
    expect(ids.length).toBeGreaterThan(20);
    const ref = await referenceNll(ids);
    const one = await evaluateIds(engine, ids, { context: ids.length, stride: ids.length });
    expect(one.windows).toBe(1);
    expect(one.scored).toBe(ids.length - 1);
    expect(Math.abs(one.meanNll - ref)).toBeLessThan(1e-9);
    expect(one.perplexity).toBeCloseTo(Math.exp(ref), 6);
    const slid = await evaluateIds(engine, ids, { context: 16, stride: 8 });
    expect(slid.scored).toBe(ids.length - 1);
    expect(slid.windows).toBe(Math.ceil((ids.length - 16) / 8) + 1);
    expect(Number.isFinite(slid.meanNll) && slid.meanNll > 0).toBe(true);
  });

  test("its own greedy output is likelier than the same tokens shuffled", async () => {
    const prompt = engine.tokenizer!.encode("import os\n\ndef read_file(path):\n");
    const sched = new Scheduler(engine);
    const r = await sched.submit({ prompt, maxTokens: 24 }).result;
    await sched.close();
    const ids = [...prompt, ...r.tokenIds];
    const shuffled = [...ids];
    let s = 12345;
    for (let i = shuffled.length - 1; i > 0; i--) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      const j = s % (i + 1);
      [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]];
    }
    const own = await evaluateIds(engine, ids, { context: ids.length, stride: ids.length });
    const shuf = await evaluateIds(engine, shuffled, { context: ids.length, stride: ids.length });
    expect(own.perplexity).toBeLessThan(shuf.perplexity / 4);
  });
});

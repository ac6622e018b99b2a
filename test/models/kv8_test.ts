/**
 * The 8-bit KV cache (`kvCache: "q8"`) end to end, on the f16 path:
 *  - every dense fixture's logits (all 37 positions) against HF's float32 reference, and those of the MoE and
 *    hybrid fixtures (only their attention layers keep a cache). Tolerance 0.25 (logits
 *    span about ±5): the f16 cache rounds K/V to 2^-11 relative and meets 2e-2; int8 codes round to 1/254 of
 *    each 32-value block's max, about 8× coarser, and these random-weight models measure 0.08–0.15. A wrong
 *    scale, block or layout moves logits by O(1);
 *  - the pool holds codes + scales: 1.125 bytes per value at head dim 32 multiples (f16: 2);
 *  - greedy decoding of the bundled model: two concurrent streams give the ids each gives alone (the q8
 *    kernels keep rows batch-invariant), and an unknown cache type is a clear error.
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { ValidationError } from "../../src/errors.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { keepsKv } from "../../src/models/model.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden, worstLogit } from "../util/fixtures.ts";

const FIXTURE_NAMES = [
  "llama",
  "llama3-rope-scaled",
  "qwen2",
  "qwen3",
  "qwen3-mlx-4bit",
  "qwen3_moe",
  "qwen3_next",
  "lfm2",
  "gemma3_text",
];
const TOL = 0.25;

let gpu: Gpu | null = null;
const gpuF16 = async () => (gpu ??= await Gpu.create({ f16: true }));
afterAll(() => gpu?.destroy());

describe("8-bit KV cache", () => {
  for (const name of FIXTURE_NAMES) {
    test(`${name}: logits of all 37 positions match HF within ${TOL}`, async () => {
      const g = await readGolden(`${FIXTURES}/${name}`);
      const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
        gpu: await gpuF16(),
        contextWindow: 128,
        maxBatch: 2,
        logitRows: 64,
        kvBudget: 16 << 20,
        warmup: false,
        kvCache: "q8",
      });
      const { worst, where } = worstLogit(
        await engine.forwardLogits(g.inputIds),
        g.logits,
        engine.config.dims.vocab,
      );
      expect(worst, where).toBeLessThan(TOL);
      // One scale buffer per layer that keeps a cache (hybrids: their attention layers alone).
      expect(engine.kv.scales?.length).toBe(engine.kv.shape.layers);
      const attention = engine.config.layers?.filter(keepsKv).length ?? engine.config.dims.layers;
      expect(engine.kv.shape.layers).toBe(attention);
      expect(engine.gpu.takeErrors()).toEqual([]);
    });
  }

  test("the pool holds int8 codes and one f32 scale per 32 values", async () => {
    const dir = new DiskModelSource(DEFAULT_MODEL_DIR);
    const opts = { gpu: await gpuF16(), contextWindow: 256, maxBatch: 1, warmup: false } as const;
    const act = await Engine.load(dir, opts);
    const q8 = await Engine.load(dir, { ...opts, kvCache: "q8" });
    const hd = act.config.dims.hd;
    expect(hd % 32).toBe(0);
    expect(q8.kv.bytesPerPage / act.kv.bytesPerPage).toBeCloseTo((hd + (4 * hd) / 32) / (2 * hd), 10);
    expect(act.kv.scales).toBeNull();
  });

  test("bundled model: two concurrent greedy streams equal their solo runs", async () => {
    const engine = await Engine.load(new DiskModelSource(DEFAULT_MODEL_DIR), {
      gpu: await gpuF16(),
      contextWindow: 512,
      maxBatch: 2,
      kvCache: "q8",
      warmup: false,
    });
    const tok = engine.tokenizer!;
    const prompts = ["def quicksort(xs):", "class Stack:\n    def __init__(self):"].map((p) => tok.encode(p));
    const run = async (ps: number[][]) => {
      const sched = new Scheduler(engine, { stepsPerSubmit: 4 });
      const rs = await Promise.all(ps.map((prompt) => sched.submit({ prompt, maxTokens: 24 }).result));
      await sched.close();
      return rs.map((r) => r.tokenIds);
    };
    const solo = [...(await run([prompts[0]])), ...(await run([prompts[1]]))];
    const both = await run(prompts);
    expect(both).toEqual(solo);
    expect(new Set(solo.flat()).size).toBeGreaterThan(4);
  });

  test("an unknown cache type is refused", async () => {
    await expect(Engine.load(new DiskModelSource(DEFAULT_MODEL_DIR), {
      gpu: await gpuF16(),
      contextWindow: 256,
      warmup: false,
      kvCache: "q4" as never,
    })).rejects.toThrow(ValidationError);
  });
});

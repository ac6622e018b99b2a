/**
 * Every fixture (HF float32 reference logits from tiny random-weight checkpoints: dense, MoE and hybrid)
 * against our engine, on the f32 path and the f16 path, and greedy decoding through the scheduler against HF
 * `generate`. Prompts are prefilled in chunks of 16 rows (smaller than every prompt), so recurrent state and
 * KV cross chunk boundaries; decoding takes the lagged multi-step loop (4 steps per submit).
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden, worstLogit } from "../util/fixtures.ts";

const FIXTURE_NAMES = [
  "llama",
  "llama3-rope-scaled",
  "qwen2",
  "qwen3",
  "qwen3-mlx-4bit",
  "qwen3_moe",
  "qwen3_next",
  "qwen3_next_long",
  "qwen3_5_text",
  "qwen3_5_moe_text",
  "lfm2",
  "gemma3_text",
];
// Max |logit − HF logit| allowed (logits here span about ±5). f32 is all-f32 math and meets 1e-5 in practice;
// f16 keeps activations and the KV cache in f16 (accumulation in f32) and meets ~2e-2.
const TOL = { f32: 1e-4, f16: 5e-2 };
// These goldens' f32 gap grows with position (3e-6 at position 0) and is HF's: their RoPE inverse frequencies
// were rounded to bf16. A float64 reference with exact frequencies reproduces our logits, one with bf16-rounded
// ones the goldens (bench/experiments/golden_rope_check.ts; bench/NOTES.md, "Hybrid and MoE fixtures").
const F32_TOL: Record<string, number> = {
  qwen3_next: 3e-4,
  qwen3_next_long: 3e-3,
  qwen3_5_text: 1e-3,
  qwen3_5_moe_text: 1e-3,
  lfm2: 5e-3,
  gemma3_text: 5e-3,
};
const tolerance = (name: string, path: "f32" | "f16") => path === "f32" ? F32_TOL[name] ?? TOL.f32 : TOL.f16;

const gpus: Record<string, Gpu> = {};
async function gpuFor(path: "f32" | "f16"): Promise<Gpu> {
  return (gpus[path] ??= await Gpu.create({ f16: path === "f16" }));
}
afterAll(() => Object.values(gpus).forEach((g) => g.destroy()));

for (const path of ["f32", "f16"] as const) {
  describe(`fixtures on the ${path} path`, () => {
    for (const name of FIXTURE_NAMES) {
      test(`${name}: logits of every prompt position match HF within ${tolerance(name, path)}`, async () => {
        const gpu = await gpuFor(path);
        if (path === "f16" && !gpu.info.f16) {
          return expect.fail("adapter has no shader-f16; install mesa-vulkan-drivers");
        }
        const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
          gpu,
          contextWindow: 512,
          maxBatch: 2,
          prefillChunk: 16,
          logitRows: 64,
          kvBudget: 16 << 20,
          warmup: false,
        });
        const g = await readGolden(`${FIXTURES}/${name}`);
        const { worst, where } = worstLogit(
          await engine.forwardLogits(g.inputIds),
          g.logits,
          engine.config.dims.vocab,
        );
        expect(worst, where).toBeLessThan(tolerance(name, path));
        expect(gpu.takeErrors()).toEqual([]);
      });

      if (name === "qwen3-mlx-4bit") continue; // its goldens come from float64 math, no HF generate run
      test(`${name}: greedy ids through the scheduler match HF generate`, async () => {
        const g = await readGolden(`${FIXTURES}/${name}`);
        const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
          gpu: await gpuFor(path),
          contextWindow: 512,
          maxBatch: 2,
          prefillChunk: 16,
          kvBudget: 16 << 20,
          warmup: false,
        });
        const sched = new Scheduler(engine, { stepsPerSubmit: 4 });
        const r = await sched.submit({ prompt: g.inputIds, maxTokens: g.greedyIds!.length }).result;
        await sched.close();
        expect(r.tokenIds).toEqual(g.greedyIds);
      });
    }
  });
}

/**
 * Every dense fixture (HF float32 reference logits from tiny random-weight checkpoints) against our engine,
 * on the f32 path and the f16 path, and greedy decoding through the scheduler against HF `generate`.
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden, worstLogit } from "../util/fixtures.ts";

const FIXTURE_NAMES = ["llama", "llama3-rope-scaled", "qwen2", "qwen3", "qwen3-mlx-4bit"];
// Max |logit − HF logit| allowed (logits here span about ±5). f32 is all-f32 math and meets 1e-5 in practice;
// f16 keeps activations and the KV cache in f16 (accumulation in f32) and meets ~2e-2.
const TOL = { f32: 1e-4, f16: 5e-2 };

const gpus: Record<string, Gpu> = {};
async function gpuFor(path: "f32" | "f16"): Promise<Gpu> {
  return (gpus[path] ??= await Gpu.create({ f16: path === "f16" }));
}
afterAll(() => Object.values(gpus).forEach((g) => g.destroy()));

for (const path of ["f32", "f16"] as const) {
  describe(`fixtures on the ${path} path`, () => {
    for (const name of FIXTURE_NAMES) {
      test(`${name}: logits of all 37 positions match HF within ${TOL[path]}`, async () => {
        const gpu = await gpuFor(path);
        if (path === "f16" && !gpu.info.f16) {
          return expect.fail("adapter has no shader-f16; install mesa-vulkan-drivers");
        }
        const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
          gpu,
          contextWindow: 128,
          maxBatch: 2,
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
        expect(worst, where).toBeLessThan(TOL[path]);
        expect(gpu.takeErrors()).toEqual([]);
      });

      if (name === "qwen3-mlx-4bit") continue; // its goldens come from float64 math, no HF generate run
      test(`${name}: greedy ids through the scheduler match HF generate`, async () => {
        const g = await readGolden(`${FIXTURES}/${name}`);
        const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
          gpu: await gpuFor(path),
          contextWindow: 128,
          maxBatch: 2,
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

/**
 * MoE and hybrid fixtures under continuous batching: four sequences decoded together (prefill chunks of 16
 * rows beside decode rows, the lagged multi-step loop) give each sequence the greedy ids it gets alone.
 * Recurrent state lives per slot, so this also checks that slots never see each other's state; Gemma's
 * sliding window (8) is shorter than every prompt. Also: gated DeltaNet prefill by either form.
 */
import { afterAll, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden } from "../util/fixtures.ts";

let gpu: Gpu | null = null;
afterAll(() => gpu?.destroy());

for (const name of ["qwen3_moe", "qwen3_next", "qwen3_5_moe_text", "lfm2", "gemma3_text"]) {
  test(`${name}: 4 concurrent sequences equal their solo runs`, async () => {
    gpu ??= await Gpu.create();
    const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/${name}`), {
      gpu,
      contextWindow: 128,
      maxBatch: 4,
      prefillChunk: 16,
      kvBudget: 16 << 20,
      warmup: false,
    });
    const g = await readGolden(`${FIXTURES}/${name}`);
    // Different lengths and contents, so prefill chunks and decode rows interleave differently.
    const prompts = [0, 1, 2, 3].map((i) => [...g.inputIds.slice(i * 3), ...g.inputIds.slice(0, i * 5)]);
    const run = (s: Scheduler, p: number[]) => s.submit({ prompt: p, maxTokens: 10 }).result;
    const solo = new Scheduler(engine, { stepsPerSubmit: 4 });
    const alone: number[][] = [];
    for (const p of prompts) alone.push((await run(solo, p)).tokenIds);
    await solo.close();
    const batch = new Scheduler(engine, { stepsPerSubmit: 4 });
    const together = await Promise.all(prompts.map((p) => run(batch, p)));
    await batch.close();
    expect(together.map((r) => r.tokenIds)).toEqual(alone);
    expect(gpu.takeErrors()).toEqual([]);
    engine.kv.destroy();
  });
}

// The profile's deltaNet.chunked picks the prefill form: the token-by-token recurrence must give the greedy ids
// of the chunked (WY) form, and both HF's (a 300-token prompt: several 64-token chunks, split into 48-row
// prefill steps that end mid-chunk).
test("qwen3_next_long: prefill by the recurrence and by chunks give HF's greedy ids", async () => {
  gpu ??= await Gpu.create();
  const g = await readGolden(`${FIXTURES}/qwen3_next_long`);
  const ids: number[][] = [];
  for (const chunked of [true, false]) {
    const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/qwen3_next_long`), {
      gpu: gpu.withProfile({ deltaNet: { chunked } }),
      contextWindow: 512,
      maxBatch: 1,
      prefillChunk: 48,
      kvBudget: 16 << 20,
      warmup: false,
    });
    const s = new Scheduler(engine, { stepsPerSubmit: 4 });
    ids.push((await s.submit({ prompt: g.inputIds, maxTokens: g.greedyIds!.length }).result).tokenIds);
    await s.close();
    engine.kv.destroy();
  }
  expect(ids[0]).toEqual(g.greedyIds);
  expect(ids[1]).toEqual(g.greedyIds);
  expect(gpu.takeErrors()).toEqual([]);
});

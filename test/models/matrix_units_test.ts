/**
 * The engine on Dawn's matrix units (prefill matmuls and, head dim 128, prefill attention): a synthetic
 * Qwen3-0.6B shape (head dim 128, GQA 2; MLX 4-bit random weights) scores a 700-token prompt in chunks of
 * 512 and of 48 rows (chunks that straddle the attention kernel's 16-row slabs and 64-key tiles, and the
 * matmuls' 128-row tiles), with the same logits at every position, bit for bit, and the same greedy ids: a
 * row's numbers do not depend on how the prompt is cut. It runs where Dawn offers f16 16×16×16 matrices
 * with subgroups of 32 (the H200 with dawn.node); elsewhere it is skipped.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { SyntheticModelSource } from "../../src/loader/synthetic.ts";
import { usesMatrixAttention } from "../../src/ops/attention_matrix.ts";
import { DEFAULT_MODEL_DIR, DiskModelSource } from "../../src/platform/deno.ts";
import { matrixGpu, NO_MATRIX_UNITS } from "../util/lab.ts";

let gpu: Gpu | null = null;
beforeAll(async () => {
  gpu = await matrixGpu((g) => usesMatrixAttention(g, { hd: 128 }));
});
afterAll(() => gpu?.destroy());

let x = 777;
const prompt = Array.from({ length: 700 }, () => (x = (x * 1103515245 + 12345) % 2 ** 31) % 16000 + 2);

test("chunks of 512 and of 48 rows: the same logits, bit for bit, and the same greedy ids", async (ctx) => {
  if (!gpu) return ctx.skip(NO_MATRIX_UNITS);
  const src = new SyntheticModelSource("qwen3-0.6b", new DiskModelSource(DEFAULT_MODEL_DIR));
  const load = (chunk: number) =>
    Engine.load(src, {
      gpu: gpu!,
      weightSource: src.weightSource({ seed: 3 }),
      contextWindow: 1024,
      prefillChunk: chunk,
      soloPrefillChunk: chunk,
      logitRows: chunk,
      warmup: false,
    });
  const ids: number[][] = [];
  let first: Float32Array | null = null;
  for (const chunk of [512, 48]) {
    // Not destroyed: that would destroy the shared device (both fit with room to spare).
    const engine = await load(chunk);
    const logits = await engine.forwardLogits(prompt);
    expect(logits.some((v) => v !== 0)).toBe(true);
    if (first) expect(logits.findIndex((v, i) => !Object.is(v, first![i]))).toBe(-1);
    else first = logits;
    const s = new Scheduler(engine, { prefixCacheBytes: 0 });
    ids.push((await s.submit({ prompt, maxTokens: 16 }).result).tokenIds);
    await s.close();
  }
  expect(ids[0].length).toBeGreaterThan(0);
  expect(ids[1]).toEqual(ids[0]);
  expect(gpu.takeErrors()).toEqual([]);
});

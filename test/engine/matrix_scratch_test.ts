/**
 * What the engine decides for the matrix units without running them (CI has none): which linears take them
 * (`usesMatrixUnits`: 4- and 8-bit weights with K a multiple of 32, on a device offering f16 16×16×16
 * matrices with subgroups of 32, when the profile allows), the scratches the engine allocates for them
 * (`matrixScratchBytes`: x at the largest K for the step's rows, the largest shard and its f32 tiles capped
 * at 256 MiB but never below one 128-row block, rows in whole tiles; the engine leaves out the vocab-sized
 * embedding and LM head), the K-splits of narrow matrices (`matrixSplits`), and
 * the rows of a prompt's step when it runs alone (`soloRowsCap`: the profile's `matrixSoloRows` when any
 * prefill matmul takes matrix units, else 2048; `soloRowsFit` within it and the binding limit), and
 * `linearsIn`, which finds every dense Linear of a model's weights and no expert stack (the MoE fixture,
 * loaded here).
 */
import { afterAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { linearsIn, soloRowsCap, soloRowsFit } from "../../src/engine/resources.ts";
import { Gpu, type GpuInfo } from "../../src/gpu/device.ts";
import { applyProfile, defaultProfile } from "../../src/gpu/profile.ts";
import type { Linear, WeightFormat } from "../../src/ops/linear.ts";
import {
  MATRIX_SCRATCH_CAP_BYTES,
  matrixScratchBytes,
  matrixSplits,
  usesMatrixUnits,
} from "../../src/ops/matmul_matrix.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES } from "../util/fixtures.ts";

const f16Config = { M: 16, N: 16, K: 16, componentType: "f16", resultComponentType: "f32" };
function device(over: Partial<GpuInfo> = {}, matrixUnits = true) {
  const info = {
    adapter: "test",
    webgpu: "dawn",
    subgroupMatrix: [f16Config],
    f16: true,
    subgroups: true,
    subgroupMinSize: 32,
    subgroupMaxSize: 32,
    timestamps: false,
    maxBinding: 2 ** 31,
    maxBuffer: 2 ** 32,
    maxWorkgroupStorage: 49152,
    maxStorageBuffers: 10,
    maxInvocations: 1024,
    uniformAlign: 256,
    storageAlign: 256,
    int8Dot: true,
    ...over,
  } as GpuInfo;
  return { info, profile: applyProfile(defaultProfile(info), { matmul: { tiled: { matrixUnits } } }) };
}
const q = (bits: number, groupSize = 64): WeightFormat => ({ kind: "q", bits, groupSize, scaleF16: false });
const linear = (N: number, K: number, format: WeightFormat, shardRows = [N]): Linear => ({
  name: `w${N}x${K}`,
  N,
  K,
  format,
  shards: shardRows.map((n, i) => ({ n0: i, n, w: {} as GPUBuffer })),
});

describe("matrix units: choice and scratch", () => {
  test("4- and 8-bit weights with K % 32 = 0 take them; other formats, K, devices or the profile's off do not", () => {
    const d = device();
    expect(usesMatrixUnits(d, { format: q(4), K: 2560 })).toBe(true);
    expect(usesMatrixUnits(d, { format: q(8, 32), K: 96 })).toBe(true);
    expect(usesMatrixUnits(d, { format: q(3), K: 2560 })).toBe(false);
    expect(usesMatrixUnits(d, { format: { kind: "bf16" }, K: 2560 })).toBe(false);
    expect(usesMatrixUnits(d, { format: q(4), K: 2568 })).toBe(false);
    expect(usesMatrixUnits(device({ subgroupMatrix: [] }), { format: q(4), K: 2560 })).toBe(false);
    expect(usesMatrixUnits(device({ subgroupMinSize: 16 }), { format: q(4), K: 2560 })).toBe(false);
    expect(usesMatrixUnits(device({ f16: false }), { format: q(4), K: 2560 })).toBe(false);
    expect(usesMatrixUnits(device({}, false), { format: q(4), K: 2560 })).toBe(false);
  });

  test(
    "scratch: x for the rows at the largest K; the largest shard and its f32 tiles, capped, never below a " +
      "128-row block; rows in whole tiles",
    () => {
      const d = device();
      const lins = [linear(6144, 2560, q(4)), linear(2560, 9728, q(4)), linear(19456, 2560, q(4))];
      expect(matrixScratchBytes(d, 2048, lins)).toEqual({
        x: 2048 * 9728 * 2,
        w: 19456 * 2560 * 2,
        y: 2048 * 19456 * 4, // gate|up's tiles outgrow down_proj's two K-splits of 2560 columns
      });
      // A 3-bit weight with a larger K takes no matrix units, so it sizes nothing; rows: whole tiles.
      expect(matrixScratchBytes(d, 64, [...lins, linear(512, 16384, q(3))])!.x).toBe(128 * 9728 * 2);
      // Shards: the largest one counts, not the whole matrix, in whole tiles; narrow ones with their splits.
      const sharded = matrixScratchBytes(d, 64, [linear(3000, 1024, q(8), [1000, 2000])])!;
      expect(sharded.w).toBe(2048 * 1024 * 2);
      expect(sharded.y).toBe(2 * 2048 * 128 * 4);
      const huge = linear(200_000, 4096, q(4));
      expect(matrixScratchBytes(d, 64, [huge])!.w).toBe(MATRIX_SCRATCH_CAP_BYTES);
      expect(matrixScratchBytes(d, 2048, [huge])!.y).toBe(MATRIX_SCRATCH_CAP_BYTES);
      const longK = linear(128, 2 ** 20, q(4));
      expect(matrixScratchBytes(d, 64, [longK])!.w).toBe(128 * 2 ** 20 * 2);
      expect(matrixScratchBytes(device({}, false), 2048, lins)).toBeNull();
      expect(matrixScratchBytes(d, 2048, [linear(512, 512, q(3))])).toBeNull();
    },
  );

  test("a prompt alone takes wider steps where its matmuls run on matrix units, within the binding limit", () => {
    const dims = {
      hidden: 2560,
      layers: 2,
      nq: 32,
      nkv: 8,
      hd: 128,
      rotary: 128,
      intermediate: 9728,
      vocab: 151936,
      eps: 1e-6,
    };
    const weights = { layers: [{ qkv: linear(6144, 2560, q(4)), down: linear(2560, 9728, q(4)) }] };
    const lmHeadOnly = { head: linear(dims.vocab, 2560, q(4)), mlp: linear(2560, 9728, { kind: "bf16" }) };
    const d = device();
    expect(d.profile.matmul.tiled.matrixSoloRows).toBe(4096);
    expect(soloRowsCap(d, dims, weights)).toBe(4096);
    expect(soloRowsCap(device({}, false), dims, weights)).toBe(2048);
    expect(soloRowsCap(device({ subgroupMatrix: [] }), dims, weights)).toBe(2048);
    // The LM head never runs on matrix units, so a model whose other weights are 16-bit keeps 2048.
    expect(soloRowsCap(d, dims, lmHeadOnly)).toBe(2048);
    expect(soloRowsFit(dims, 8, d, undefined, 4096)).toBe(4096);
    expect(soloRowsFit(dims, 8, d)).toBe(2048);
    // gate|up in f16 is 2·9728·2 bytes a row: a 256 MiB binding holds 6,898 of them, less the decode rows.
    const small = device({ maxBinding: 2 ** 28 });
    expect(soloRowsFit(dims, 8, small, undefined, 8192)).toBe(Math.floor((2 ** 28 / 38912 - 8) / 64) * 64);
  });

  test("K-splits: narrow matrices in splitK parts (k a multiple of 32), wide ones whole, whatever M", () => {
    const t = device().profile.matmul.tiled;
    expect(t.splitK).toBe(2);
    expect(matrixSplits(t, 2560, 9728)).toEqual({ splits: 2, kc: 4864 });
    expect(matrixSplits(t, 2560, 4000)).toEqual({ splits: 2, kc: 2016 });
    expect(matrixSplits(t, 19456, 2560)).toEqual({ splits: 1, kc: 2560 });
    expect(matrixSplits(t, 100, 32)).toEqual({ splits: 1, kc: 32 });
  });
});

describe("linearsIn", () => {
  let gpu: Gpu | null = null;
  afterAll(() => gpu?.destroy());

  test("the MoE fixture: every dense linear once, no expert stack", async () => {
    gpu = await Gpu.create({ f16: false });
    const opts = { gpu, contextWindow: 64, maxBatch: 1, kvBudget: 16 << 20, warmup: false };
    const engine = await Engine.load(new DiskModelSource(`${FIXTURES}/qwen3_moe`), opts);
    const found = linearsIn(engine.weights);
    expect(found.length).toBeGreaterThan(0);
    expect(new Set(found).size).toBe(found.length);
    for (const l of found) {
      expect(l.shards.length).toBeGreaterThan(0);
      expect("E" in l).toBe(false);
    }
    const layers = engine.config.dims.layers;
    // Per layer at least q|k|v and o (the MLP is MoE: its router may be a Linear, its experts are stacks).
    expect(found.length).toBeGreaterThanOrEqual(2 * layers);
    const names = found.map((l) => l.name).join(" ");
    expect(names).not.toMatch(/experts|switch_mlp/);
    engine.kv.destroy();
  });
});

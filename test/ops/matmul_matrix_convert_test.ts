/**
 * The matrix-unit matmul's two conversions, which need no matrix units and so run here (lavapipe):
 * - rows_f16.wgsl: rows row0 .. row0+M−1 of f32 x as f16, values past ±65504 saturated (not ±inf);
 * - dequant_f16.wgsl: an MLX 4- or 8-bit weight (f16 or bf16 scales, groups 32/64/128) as f16.
 * Against float64 on random inputs of odd sizes: each half within one f16 ulp of the exact value (WGSL may
 * round the f32 → f16 conversion either way; the weight's f32 fma adds at most half an f32 ulp).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import { grid1d } from "../../src/gpu/kernel.ts";
import { BufferSet, readU32, runOnce, seal } from "../../src/lab/harness.ts";
import { halfValue } from "../../src/lab/ref/half.ts";
import { dequantRow, parseFormat } from "../../src/lab/ref/quant.ts";
import { randomWeights } from "../../src/lab/cases/weights.ts";
import { Rng } from "../../src/lab/rng.ts";
import { record } from "../../src/ops/context.ts";
import { formatVariant } from "../../src/ops/linear.ts";

let gpu: Gpu;
beforeAll(async () => {
  gpu = await Gpu.create();
});
afterAll(() => gpu.destroy());

/** One f16 ulp at |v| (subnormals: 2^-24). */
function ulp(v: number): number {
  const a = Math.abs(v);
  return a < 2 ** -14 ? 2 ** -24 : 2 ** (Math.floor(Math.log2(a)) - 10);
}

/** The halves of `n` packed words read back, low half first. */
async function halves(buf: GPUBuffer, n: number): Promise<number[]> {
  const words = await readU32(gpu, buf, Math.ceil(n / 2));
  const out: number[] = [];
  for (const w of words) out.push(halfValue(w & 0xffff, "f16"), halfValue(w >>> 16, "f16"));
  return out.slice(0, n);
}

function expectNear(got: number[], want: ArrayLike<number>, what: string): void {
  let bad = 0;
  let first = "";
  for (let i = 0; i < want.length; i++) {
    if (!Number.isFinite(got[i]) || Math.abs(got[i] - want[i]) > ulp(want[i])) {
      if (!bad++) first = `[${i}] got ${got[i]}, want ${want[i]}`;
    }
  }
  expect(bad, `${what}: ${bad} of ${want.length} off by more than an f16 ulp, first ${first}`).toBe(0);
}

describe("matrix units: f16 conversions", () => {
  test("rows_f16: rows row0.. of x, odd M, values past the f16 range saturate", async () => {
    const [M, K, row0] = [37, 200, 3];
    const rng = new Rng(5);
    const x = Float32Array.from({ length: (row0 + M) * K }, () => rng.signed(4));
    // Outliers: past the range both ways, and one just inside.
    for (const [i, v] of [[row0 * K + 5, 1e5], [(row0 + 7) * K + 11, -70000], [(row0 + M - 1) * K, 65000]]) {
      x[i] = v;
    }
    const set = new BufferSet(gpu);
    const ctx = set.context();
    const xb = set.upload("x", x);
    const out = set.scratch("out", M * K * 2);
    await record(ctx, { file: "rows_f16.wgsl" }, {
      buffers: { x: xb, out },
      params: { M, K, row0 },
      grid: grid1d(Math.ceil((M * K) / 8 / 256)),
    });
    const b = seal(set, ctx, { maxKvLen: 1 }, () => Promise.resolve({}));
    runOnce(b);
    const got = await halves(out, M * K);
    const want = Array.from(x.subarray(row0 * K), (v) => Math.min(65504, Math.max(-65504, v)));
    expectNear(got, want, "rows_f16");
    expect(got[5]).toBe(65504);
    expect(got[7 * K + 11]).toBe(-65504);
    expect(gpu.takeErrors()).toEqual([]);
    b.destroy();
  });

  for (
    const [w, scale, N, K] of [
      ["q4g32", "f16", 133, 96],
      ["q4g64", "bf16", 70, 192],
      ["q4g128", "f16", 65, 256],
      ["q8g32", "bf16", 133, 160],
      ["q8g64", "f16", 97, 128],
    ] as const
  ) {
    test(`dequant_f16: ${w}, ${scale} scales, N=${N}, K=${K}`, async () => {
      const f = parseFormat(w, scale);
      const rng = new Rng(N + K);
      const [shard] = randomWeights(rng, f, N, K, { amp: 2, minShards: 1, maxBinding: 2 ** 30 });
      const set = new BufferSet(gpu);
      const ctx = set.context();
      const out = set.scratch("out", N * K * 2);
      const { defines, overrides } = formatVariant(f, "tiled");
      await record(ctx, {
        file: "dequant_f16.wgsl",
        defines: defines.SCALE_F16 ? { SCALE_F16: 1 } : {},
        overrides,
      }, {
        buffers: {
          w: set.upload("w", shard.packed.w),
          scales: set.upload("scales", shard.packed.scales!),
          biases: set.upload("biases", shard.packed.biases!),
          out,
        },
        params: { N, K },
        grid: grid1d(Math.ceil((N * K) / 8 / 256)),
      });
      const b = seal(set, ctx, { maxKvLen: 1 }, () => Promise.resolve({}));
      runOnce(b);
      const got = await halves(out, N * K);
      const want = new Float64Array(N * K);
      for (let n = 0; n < N; n++) want.set(dequantRow(f, shard.packed, n, K), n * K);
      expectNear(got, want, `dequant_f16 ${w}`);
      expect(gpu.takeErrors()).toEqual([]);
      b.destroy();
    });
  }
});

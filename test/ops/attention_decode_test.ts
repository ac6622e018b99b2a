/**
 * Decode attention over the paged cache against src/lab/ref/attention.ts, pages shuffled:
 *  - decode (attention_decode.wgsl + attention_combine.wgsl, split-K over 256 keys): GQA ratios 1, 3, 4,
 *    KV lengths over 256 (several splits), odd lengths, length 1, head dims 32/64/128, rows after row0;
 *    64/128-key splits (up to 40 to merge) and 256-lane workgroups;
 *  - decode with RoPE fused (the engine's decode path: q from the raw QKV projection, Q/K norm, rotate-half
 *    RoPE, the new K/V written into the cache; the whole pool is compared): G 4 and 6 (two blocks write
 *    the same key), partial rotary with a half that is not a multiple of 8, head dims 32/128/256, length 1,
 *    several splits, the swept split shapes, the workgroup-memory path (no subgroups), and steps whose
 *    longer rows take rope.wgsl and the plain kernel instead (profile `fusedRopeMaxKeys`, four keys per step
 *    off); four keys per step (`fourKeysPerStep`, f16 and q8 caches where subgroups cover a key group)
 *    against the two-key loop, and 512-key splits past `longRowKeys`;
 *  - sliding windows of 8 and 5 keys, plain and with RoPE fused, in one split and over 16-key splits (the
 *    ones before the window skipped by both kernels), four and two keys per step;
 *  - without subgroups (workgroup-memory reductions): decode with RoPE fused and plain, f16 and q8 caches.
 * Prefill is in attention_prefill_test.ts, the 8-bit cache in attention_q8_test.ts.
 * Tolerance: f32 |d| ≤ 2e-6 + 1e-4·|ref|; f16 |d| ≤ 5e-4 + 2e-3·|ref|; the same for q8 (the kernels
 * dequantize to the reference's f32 values), and K/V written into a q8 cache as in attention_q8_test.ts.
 */
import { afterAll, beforeAll, describe, test } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import { attentionDecodeCase } from "../../src/lab/cases/attention_decode.ts";
import { decode } from "../util/attention.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`attention, ${path} activations`, () => {
    test(
      "decode: GQA 1, 3, 4; lengths up to 601 (3 splits), odd; head dims 64, 32, 128",
      on(path, async (gpu) => {
        await expectCase(gpu, attentionDecodeCase, { D: 3, nq: 4, nkv: 4, hd: 64, ps: 16, len: 601 }, 1);
        await expectCase(gpu, attentionDecodeCase, { D: 2, nq: 6, nkv: 2, hd: 32, ps: 7, len: 513 }, 2);
        await expectCase(gpu, attentionDecodeCase, { D: 4, nq: 8, nkv: 2, hd: 128, ps: 16, len: 257 }, 3);
      }),
    );
    test(
      "decode shapes the benchmark sweeps: 64- and 128-key splits (up to 40 splits to merge), " +
        "256-lane workgroups",
      on(path, async (gpu) => {
        for (const [keysPerSplit, workgroupSize] of [[64, 128], [128, 256], [64, 256]]) {
          const g = decode(gpu, { keysPerSplit, workgroupSize });
          await expectCase(g, attentionDecodeCase, { D: 2, nq: 8, nkv: 2, hd: 128, ps: 16, len: 2501 }, 7);
          await expectCase(g, attentionDecodeCase, { D: 3, nq: 6, nkv: 2, hd: 64, ps: 8, len: 199 }, 8);
        }
      }),
    );
    test(
      "decode with RoPE fused: q/k norm, G 4 over 3 splits; G 6 (two blocks) with rot 40 of 64 and mscale",
      on(path, async (gpu) => {
        const qwen = { rope: 1, qknorm: 1, rot: 128, mscale: 1, theta: 1e6 };
        await expectCase(gpu, attentionDecodeCase, {
          D: 3,
          nq: 8,
          nkv: 2,
          hd: 128,
          ps: 16,
          len: 601,
          ...qwen,
        }, 11);
        await expectCase(gpu, attentionDecodeCase, {
          D: 2,
          nq: 6,
          nkv: 1,
          hd: 64,
          ps: 7,
          len: 300,
          rope: 1,
          qknorm: 0,
        }, 12);
      }),
    );
    test(
      "decode with RoPE fused: length 1 after other rows, head dim 32; head dim 256 (two heads per group)",
      on(path, async (gpu) => {
        await expectCase(gpu, attentionDecodeCase, {
          D: 2,
          nq: 4,
          nkv: 4,
          hd: 32,
          ps: 5,
          len: 1,
          row0: 2,
          rope: 1,
          rot: 32,
        }, 13);
        await expectCase(gpu, attentionDecodeCase, {
          D: 2,
          nq: 3,
          nkv: 1,
          hd: 256,
          ps: 16,
          len: 260,
          rope: 1,
          rot: 256,
        }, 14);
      }),
    );
    test(
      "decode with RoPE: rows longer than fusedRopeMaxKeys take rope.wgsl + the plain kernel in the same " +
        "step; 0",
      on(path, async (gpu) => {
        // Four keys per step (on by default for f16 and q8 caches with subgroups) fuses RoPE at every length.
        for (const fusedRopeMaxKeys of [300, 0]) {
          const g = decode(gpu, { fusedRopeMaxKeys, fourKeysPerStep: false });
          await expectCase(g, attentionDecodeCase, {
            D: 5,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            len: 601,
            rope: 1,
            rot: 128,
          }, 18);
          await expectCase(g, attentionDecodeCase, {
            D: 3,
            nq: 6,
            nkv: 1,
            hd: 64,
            ps: 7,
            len: 520,
            rope: 1,
            qknorm: 0,
            row0: 2,
          }, 19);
          // One long row: the short-row dispatch is skipped.
          await expectCase(g, attentionDecodeCase, {
            D: 1,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            len: 601,
            rope: 1,
            rot: 128,
          }, 21);
        }
      }),
    );
    test(
      "decode, four keys per step (f16 cache with subgroups) against the two-key loop; " +
        "512-key splits past 300 keys",
      on(path, async (gpu) => {
        for (
          const t of [{ fourKeysPerStep: true }, { fourKeysPerStep: false }, {
            fourKeysPerStep: true,
            longRowKeys: 300,
          }]
        ) {
          const g = decode(gpu, t);
          await expectCase(g, attentionDecodeCase, { D: 3, nq: 8, nkv: 2, hd: 64, ps: 16, len: 1001 }, 31);
          await expectCase(
            g,
            attentionDecodeCase,
            { D: 2, nq: 6, nkv: 2, hd: 32, ps: 9, len: 777, row0: 1 },
            32,
          );
          await expectCase(g, attentionDecodeCase, {
            D: 3,
            nq: 8,
            nkv: 2,
            hd: 64,
            ps: 16,
            len: 901,
            rope: 1,
            rot: 64,
          }, 33);
          await expectCase(g, attentionDecodeCase, {
            D: 2,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            len: 700,
            rope: 1,
            rot: 128,
          }, 34);
        }
      }),
    );
    test(
      "decode with RoPE fused, swept shapes: 64-key splits with 256 lanes, 128-key splits with 512 lanes; " +
        "combine of 512 / 256 lanes",
      on(path, async (gpu) => {
        // 512-lane combine: 16 groups of splits for 11 splits (some groups stay empty).
        for (
          const [keysPerSplit, workgroupSize, fusedRopeWorkgroupSize, combineWorkgroupSize] of [[
            64,
            256,
            256,
            512,
          ], [128, 128, 512, 256]]
        ) {
          const g = decode(gpu, {
            keysPerSplit,
            workgroupSize,
            fusedRopeWorkgroupSize,
            combineWorkgroupSize,
          });
          await expectCase(g, attentionDecodeCase, {
            D: 2,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            len: 700,
            rope: 1,
            rot: 128,
          }, 15);
        }
      }),
    );
    test(
      "decode, sliding window 8 and 5 over up to 70 keys: one split; 16-key splits (those before the " +
        "window skipped) with four and two keys per step; RoPE fused",
      on(path, async (gpu) => {
        const plain = { D: 3, nq: 6, nkv: 2, hd: 64, ps: 7, len: 70, row0: 1, window: 8 };
        const roped = { D: 3, nq: 8, nkv: 2, hd: 128, ps: 16, len: 45, rope: 1, rot: 128, window: 5 };
        await expectCase(gpu, attentionDecodeCase, plain, 22);
        for (const fourKeysPerStep of [true, false]) {
          const g = decode(gpu, { keysPerSplit: 16, fourKeysPerStep });
          await expectCase(g, attentionDecodeCase, plain, 22);
          await expectCase(g, attentionDecodeCase, roped, 23);
        }
      }),
    );
    test(
      "decode: length 1, and decode rows after other rows (row0 = 3)",
      on(path, async (gpu) => {
        await expectCase(gpu, attentionDecodeCase, { D: 1, nq: 2, nkv: 1, hd: 64, ps: 16, len: 1 }, 4);
        await expectCase(
          gpu,
          attentionDecodeCase,
          { D: 2, nq: 4, nkv: 1, hd: 64, ps: 5, len: 299, row0: 3 },
          5,
        );
      }),
    );
  });
}

describe("attention without subgroups (workgroup-memory reductions)", () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await Gpu.create({ f16: false, subgroups: false });
  });
  afterAll(() => gpu?.destroy());
  test("decode with RoPE fused and q/k norm (128 and 512 lanes); plain decode", async () => {
    await expectCase(gpu, attentionDecodeCase, {
      D: 2,
      nq: 8,
      nkv: 2,
      hd: 128,
      ps: 16,
      len: 300,
      rope: 1,
      rot: 128,
    }, 16);
    const g = decode(gpu, { fusedRopeWorkgroupSize: 512 });
    await expectCase(g, attentionDecodeCase, {
      D: 2,
      nq: 8,
      nkv: 2,
      hd: 64,
      ps: 16,
      len: 300,
      rope: 1,
      rot: 64,
    }, 20);
    await expectCase(gpu, attentionDecodeCase, { D: 2, nq: 6, nkv: 2, hd: 64, ps: 8, len: 199 }, 17);
  });
  test("q8 cache: decode with RoPE fused, plain decode", async () => {
    await expectCase(gpu, attentionDecodeCase, {
      D: 2,
      nq: 8,
      nkv: 2,
      hd: 128,
      ps: 16,
      len: 300,
      rope: 1,
      rot: 128,
      kv8: 1,
    }, 49);
    await expectCase(gpu, attentionDecodeCase, { D: 2, nq: 6, nkv: 2, hd: 64, ps: 8, len: 199, kv8: 1 }, 50);
  });
});

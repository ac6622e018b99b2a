/**
 * Attention over the paged cache against src/lab/ref/attention.ts, pages shuffled:
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
 *  - prefill (attention_prefill.wgsl; attention_prefill_quad.wgsl has its own file of tests): segments longer
 *    than one query tile, several key tiles, segments starting at a non-zero position (earlier KV already
 *    cached), GQA, a segment of one row; the two-vector kernel's bits do not depend on the key-tile size
 *    (head dims 128, 64, 16, 8: f16 tiles with P·V summed in f16 per eight keys, or f32 tiles, four keys per
 *    step); q8 with integer q·k (`qk8`): the V tile in f16 with P·V summed in f16 per eight keys on f16, in
 *    f32 otherwise, over 1.6k keys too, bit-identical across tile sizes; the f16 cache's checks hold over
 *    1.6k keys too, in both kernels;
 *  - the 8-bit cache (`kv8`: q8 codes + a scale per block, src/lab/ref/kv8.ts; block scales that differ up
 *    to 2× between neighbours, no zero codes): decode (GQA 1/3/4, several splits, odd lengths, head dims
 *    64/32/128; four keys per step and eight dims per lane, 64-key splits, 512-key splits past longRowKeys),
 *    decode with RoPE fused (the new K/V quantized as they are written; the whole pool compared), rows
 *    that take rope.wgsl + the plain kernel, prefill (several tiles, GQA, head dims 64/128, one row), and
 *    without subgroups. (Page sizes ≥ 9 where a 512-key split may be taken: it spans at most 64 pages.)
 * Tolerance: f32 |d| ≤ 2e-6 + 1e-4·|ref|; f16 |d| ≤ 5e-4 + 2e-3·|ref| (prefill rounds q·scale to f16), and
 * for prefill on f16 plus 10·2^-11 of each output's softmax-weighted mean |v| (its P·V summed in f16 per
 * eight keys: the first-order rounding bound, src/lab/cases/attention.ts);
 * the same for q8 (the kernels dequantize to the reference's f32 values). K/V written into a q8 cache: the
 * reference's codes, either code only for a value within the kernel's f32 error (1e-6 + 2e-6·|x|) of a
 * rounding boundary, and values within that error on the block max plus a few f32 ulp (|d| ≤ 1e-6 +
 * 2.5e-6·amax + 2^-23·|ref|; quantizeWritten, kv8Tolerance in src/lab/cases/paged.ts). Attention is then
 * checked over the K/V the kernel wrote.
 */
import { afterAll, beforeAll, describe, test } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import { attentionDecodeCase, attentionPrefillCase } from "../../src/lab/cases/attention.ts";
import type { DecodeAttentionProfile, PrefillAttentionProfile } from "../../src/gpu/profile.ts";
import { devices, expectBitwise, expectCase, outputsOf } from "../util/lab.ts";

const { on } = devices();
/** The device under decode- or prefill-attention profile changes. */
const decode = (gpu: Gpu, d: Partial<DecodeAttentionProfile>) => gpu.withProfile({ decodeAttention: d });
const prefill = (gpu: Gpu, p: Partial<PrefillAttentionProfile>) => gpu.withProfile({ prefillAttention: p });

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
      "decode shapes the benchmark sweeps: 64- and 128-key splits (up to 40 splits to merge), 256-lane workgroups",
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
      "decode with RoPE: rows longer than fusedRopeMaxKeys take rope.wgsl + the plain kernel in the same step; 0",
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
      "decode, four keys per step (f16 cache with subgroups) against the two-key loop; 512-key splits past 300 keys",
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
      "decode with RoPE fused, swept shapes: 64-key splits with 256 lanes, 128-key splits with 512 lanes; combine of 512 / 256 lanes",
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
    test(
      "prefill: segment at position 37 over several query and key tiles, GQA 3",
      on(path, async (gpu) => {
        await expectCase(
          gpu,
          attentionPrefillCase,
          { S: 45, p0: 37, nq: 6, nkv: 2, hd: 64, ps: 16, row0: 2 },
          6,
        );
      }),
    );
    test(
      "prefill: from position 0 (GQA 1), GQA 4 with hd 128 and page size 7",
      on(path, async (gpu) => {
        await expectCase(
          gpu,
          attentionPrefillCase,
          { S: 70, p0: 0, nq: 3, nkv: 3, hd: 64, ps: 16, row0: 0 },
          7,
        );
        await expectCase(gpu, attentionPrefillCase, {
          S: 33,
          p0: 101,
          nq: 8,
          nkv: 2,
          hd: 128,
          ps: 7,
          row0: 1,
        }, 8);
      }),
    );
    test(
      "prefill, two-vector kernel: 16-, 32- and 64-key tiles give the same bits and hold the checks; head dims 128, 64, 16, 8",
      on(path, async (gpu) => {
        // f16: the cache's f16 words in the tiles, P·V summed in f16 per eight keys; f32: f32 tiles, four keys per step.
        for (
          const shape of [
            { S: 70, p0: 9, nq: 8, nkv: 2, hd: 128, ps: 7, row0: 1 },
            { S: 45, p0: 37, nq: 6, nkv: 2, hd: 64, ps: 16, row0: 2 },
            { S: 40, p0: 90, nq: 4, nkv: 4, hd: 16, ps: 16, row0: 0 },
            { S: 33, p0: 5, nq: 2, nkv: 1, hd: 8, ps: 5, row0: 0 },
          ]
        ) {
          const base = await outputsOf(
            prefill(gpu, { quad: false, keysPerTile: 32 }),
            attentionPrefillCase,
            shape,
            12,
          );
          for (const keysPerTile of [64, 16]) {
            const g = prefill(gpu, { quad: false, keysPerTile });
            await expectCase(g, attentionPrefillCase, shape, 12);
            const got = await outputsOf(g, attentionPrefillCase, shape, 12);
            expectBitwise(
              got.out,
              base.out,
              `prefill ${JSON.stringify(shape)}: ${keysPerTile}- vs 32-key tiles`,
            );
          }
        }
      }),
    );
    test(
      "prefill, q8 with qk8 (V in f16, P·V summed in f16 per eight keys on f16; f32 V otherwise): the checks hold in both kernels, over 1.6k keys too; the two-vector kernel's bits do not depend on the tile size",
      on(path, async (gpu) => {
        const shapes = [
          { S: 70, p0: 101, nq: 8, nkv: 2, hd: 128, ps: 7, row0: 1, kv8: 1, qk8: 1 },
          { S: 45, p0: 37, nq: 6, nkv: 2, hd: 64, ps: 16, row0: 2, kv8: 1, qk8: 1 },
        ];
        for (const g of [gpu, prefill(gpu, { quad: false })]) {
          for (const [i, shape] of shapes.entries()) await expectCase(g, attentionPrefillCase, shape, 16 + i);
          await expectCase(g, attentionPrefillCase, {
            S: 40,
            p0: 1601,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            row0: 0,
            kv8: 1,
            qk8: 1,
          }, 18);
        }
        for (const shape of shapes) {
          const base = await outputsOf(prefill(gpu, { quad: false }), attentionPrefillCase, shape, 19);
          for (const keysPerTileInt8QK of [16, 64]) {
            const got = await outputsOf(
              prefill(gpu, { quad: false, keysPerTileInt8QK }),
              attentionPrefillCase,
              shape,
              19,
            );
            expectBitwise(
              got.out,
              base.out,
              `prefill q8 ${JSON.stringify(shape)}: ${keysPerTileInt8QK}-key tiles`,
            );
          }
        }
      }),
    );
    test(
      "prefill, f16 cache: the checks hold in both kernels, over 1.6k keys too",
      on(path, async (gpu) => {
        const shapes = [
          { S: 70, p0: 101, nq: 8, nkv: 2, hd: 128, ps: 7, row0: 1 },
          { S: 45, p0: 37, nq: 6, nkv: 2, hd: 64, ps: 16, row0: 2 },
          { S: 33, p0: 5, nq: 2, nkv: 1, hd: 8, ps: 5, row0: 0 },
        ];
        for (const g of [gpu, prefill(gpu, { quad: false })]) {
          for (const [i, shape] of shapes.entries()) await expectCase(g, attentionPrefillCase, shape, 41 + i);
          await expectCase(g, attentionPrefillCase, {
            S: 40,
            p0: 1601,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            row0: 0,
          }, 44);
        }
      }),
    );
    // The q8 decode profiles: four keys per step from raw codes where subgroups allow (the default), eight
    // dims per lane (two keys per step), 64-key splits, and splits of 2·256 keys for rows past 300 keys.
    const q8Profiles: Partial<DecodeAttentionProfile>[] = [
      {},
      { fourKeysPerStep: false },
      { keysPerSplit: 64, workgroupSize: 128 },
      { keysPerSplit: 64, workgroupSize: 256, fourKeysPerStep: false },
      { longRowKeys: 300 },
    ];
    test(
      "q8 cache, decode: GQA 1, 3, 4; lengths up to 1001 (several splits), odd; head dims 64, 32, 128; q8Profiles",
      on(path, async (gpu) => {
        for (const t of q8Profiles) {
          const g = decode(gpu, t);
          await expectCase(
            g,
            attentionDecodeCase,
            { D: 3, nq: 4, nkv: 4, hd: 64, ps: 16, len: 601, kv8: 1 },
            31,
          );
          await expectCase(
            g,
            attentionDecodeCase,
            { D: 2, nq: 6, nkv: 2, hd: 32, ps: 11, len: 513, kv8: 1 },
            32,
          );
          await expectCase(g, attentionDecodeCase, {
            D: 4,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            len: 1001,
            kv8: 1,
          }, 33);
          await expectCase(g, attentionDecodeCase, {
            D: 2,
            nq: 4,
            nkv: 1,
            hd: 64,
            ps: 9,
            len: 299,
            row0: 3,
            kv8: 1,
          }, 34);
        }
      }),
    );
    test(
      "q8 cache, decode with RoPE fused: q/k norm, G 4 over 3 splits; G 6 with rot 40 of 64 and mscale; length 1",
      on(path, async (gpu) => {
        const qwen = { rope: 1, qknorm: 1, rot: 128, mscale: 1, theta: 1e6, kv8: 1 };
        for (const t of [{}, { fourKeysPerStep: false }, { longRowKeys: 300 }]) {
          const g = decode(gpu, t);
          await expectCase(g, attentionDecodeCase, {
            D: 3,
            nq: 8,
            nkv: 2,
            hd: 128,
            ps: 16,
            len: 601,
            ...qwen,
          }, 41);
          await expectCase(g, attentionDecodeCase, {
            D: 2,
            nq: 6,
            nkv: 1,
            hd: 64,
            ps: 9,
            len: 300,
            rope: 1,
            qknorm: 0,
            kv8: 1,
          }, 42);
          // Length 1: the output is the new V itself, as the kernel quantized it.
          await expectCase(g, attentionDecodeCase, {
            D: 2,
            nq: 4,
            nkv: 4,
            hd: 32,
            ps: 9,
            len: 1,
            row0: 2,
            rope: 1,
            rot: 32,
            kv8: 1,
          }, 43);
        }
      }),
    );
    test(
      "q8 cache, decode with RoPE, two keys per step: rows longer than fusedRopeMaxKeys 300 take rope.wgsl + the plain kernel",
      on(path, async (gpu) => {
        const g = decode(gpu, { fourKeysPerStep: false, fusedRopeMaxKeys: 300 });
        await expectCase(g, attentionDecodeCase, {
          D: 5,
          nq: 8,
          nkv: 2,
          hd: 128,
          ps: 16,
          len: 601,
          rope: 1,
          rot: 128,
          kv8: 1,
        }, 44);
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
          kv8: 1,
        }, 45);
      }),
    );
    test(
      // The fused kernel would bind 11; headless Chromium's limit of 10 is the real check (test/web/web_test.ts).
      "q8 cache with q/k norm under a 10-storage-buffer limit (browsers): RoPE by rope.wgsl, then the plain kernel",
      on(path, async (gpu) => {
        const limit = gpu.info.maxStorageBuffers;
        gpu.info.maxStorageBuffers = 10;
        try {
          await expectCase(gpu, attentionDecodeCase, {
            D: 3,
            nq: 8,
            nkv: 2,
            hd: 64,
            ps: 16,
            len: 601,
            rope: 1,
            rot: 64,
            kv8: 1,
          }, 53);
        } finally {
          gpu.info.maxStorageBuffers = limit;
        }
      }),
    );
    test(
      "q8 cache, prefill: segment at position 37 over several tiles, GQA 3; hd 128 with page size 7; one row",
      on(path, async (gpu) => {
        await expectCase(gpu, attentionPrefillCase, {
          S: 45,
          p0: 37,
          nq: 6,
          nkv: 2,
          hd: 64,
          ps: 16,
          row0: 2,
          kv8: 1,
        }, 46);
        await expectCase(gpu, attentionPrefillCase, {
          S: 70,
          p0: 101,
          nq: 8,
          nkv: 2,
          hd: 128,
          ps: 7,
          row0: 1,
          kv8: 1,
        }, 47);
        await expectCase(gpu, attentionPrefillCase, {
          S: 1,
          p0: 300,
          nq: 4,
          nkv: 2,
          hd: 64,
          ps: 16,
          row0: 0,
          kv8: 1,
        }, 48);
      }),
    );
    test(
      "q8 cache, prefill with integer q·k (qk8): GQA 3 over several tiles, hd 128 (G 4) and 32, one row",
      on(path, async (gpu) => {
        await expectCase(gpu, attentionPrefillCase, {
          S: 45,
          p0: 37,
          nq: 6,
          nkv: 2,
          hd: 64,
          ps: 16,
          row0: 2,
          kv8: 1,
          qk8: 1,
        }, 49);
        await expectCase(gpu, attentionPrefillCase, {
          S: 70,
          p0: 101,
          nq: 8,
          nkv: 2,
          hd: 128,
          ps: 7,
          row0: 1,
          kv8: 1,
          qk8: 1,
        }, 50);
        await expectCase(gpu, attentionPrefillCase, {
          S: 33,
          p0: 5,
          nq: 4,
          nkv: 1,
          hd: 32,
          ps: 16,
          row0: 0,
          kv8: 1,
          qk8: 1,
        }, 51);
        await expectCase(gpu, attentionPrefillCase, {
          S: 1,
          p0: 300,
          nq: 4,
          nkv: 2,
          hd: 64,
          ps: 16,
          row0: 0,
          kv8: 1,
          qk8: 1,
        }, 52);
      }),
    );
    test(
      "prefill: a one-row segment after a long cached prefix",
      on(path, async (gpu) => {
        await expectCase(
          gpu,
          attentionPrefillCase,
          { S: 1, p0: 300, nq: 4, nkv: 2, hd: 64, ps: 16, row0: 0 },
          9,
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

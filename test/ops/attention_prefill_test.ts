/**
 * Prefill attention over the paged cache against src/lab/ref/attention.ts, pages shuffled
 * (attention_prefill.wgsl; attention_prefill_quad.wgsl has its own file of tests): segments longer than one
 * query tile, several key tiles, segments starting at a non-zero position (earlier KV already cached), GQA, a
 * segment of one row; the two-vector kernel's bits do not depend on the key-tile size (head dims 128, 64, 16,
 * 8: f16 tiles with P·V summed in f16 per eight keys, or f32 tiles, four keys per step); q8 with integer q·k
 * (`qk8`): the V tile in f16 with P·V summed in f16 per eight keys on f16, in f32 otherwise, over 1.6k keys
 * too, bit-identical across tile sizes; the f16 cache's checks hold over 1.6k keys too, in both kernels;
 * sliding windows of 8 and 5 keys in both kernels, with tiles before the window skipped (the same bits).
 * Decode is in attention_decode_test.ts, the 8-bit cache's other tests in attention_q8_test.ts.
 * Tolerance: f32 |d| ≤ 2e-6 + 1e-4·|ref|; f16 |d| ≤ 5e-4 + 2e-3·|ref| (prefill rounds q·scale to f16) plus
 * 10·2^-11 of each output's softmax-weighted mean |v| (its P·V summed in f16 per eight keys: the first-order
 * rounding bound, src/lab/cases/attention.ts); the same for q8 (the kernels dequantize to the reference's
 * f32 values).
 */
import { describe, test } from "vitest";
import { attentionPrefillCase } from "../../src/lab/cases/attention_prefill.ts";
import { prefill } from "../util/attention.ts";
import { devices, expectBitwise, expectCase, outputsOf } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`attention, ${path} activations`, () => {
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
      "prefill, two-vector kernel: 16-, 32- and 64-key tiles give the same bits and hold the checks; " +
        "head dims 128, 64, 16, 8",
      on(path, async (gpu) => {
        // f16: the cache's f16 words in the tiles, P·V summed in f16 per eight keys; f32: f32 tiles, four
        // keys per step.
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
      "prefill, q8 with qk8 (V in f16, P·V summed in f16 per eight keys on f16; f32 V otherwise): " +
        "the checks hold in both kernels, over 1.6k keys too; " +
        "the two-vector kernel's bits do not depend on the tile size",
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
    test(
      "prefill, sliding window 8 and 5 over 67 and 49 keys: both kernels, 64- and 16-key tiles (tiles " +
        "before the window skipped); the skip leaves the bits unchanged",
      on(path, async (gpu) => {
        // Two workgroups of 32 positions in the second shape (hd 128, G 4): the later one starts at tile 32.
        const shapes = [
          { S: 30, p0: 37, nq: 6, nkv: 2, hd: 64, ps: 16, row0: 2, window: 8 },
          { S: 40, p0: 9, nq: 8, nkv: 2, hd: 128, ps: 7, row0: 1, window: 5 },
        ];
        const small = { keysPerTile: 16, keysPerTileQuad: 16 };
        for (const shape of shapes) {
          // f16: the quad kernel (64- and 16-key tiles), then the two-vector one; f32: the two-vector one.
          for (const g of [gpu, prefill(gpu, small), prefill(gpu, { ...small, quad: false })]) {
            await expectCase(g, attentionPrefillCase, shape, 71);
          }
          for (const quad of [true, false]) {
            const base = await outputsOf(prefill(gpu, { quad }), attentionPrefillCase, shape, 71);
            const got = await outputsOf(prefill(gpu, { ...small, quad }), attentionPrefillCase, shape, 71);
            expectBitwise(
              got.out,
              base.out,
              `prefill ${JSON.stringify(shape)} quad ${quad}: 16- vs 64-key tiles`,
            );
          }
        }
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

/**
 * Attention over the 8-bit paged cache (`kv8`: q8 codes + a scale per block, src/lab/ref/kv8.ts; block
 * scales that differ up to 2× between neighbours, no zero codes) against src/lab/ref/attention.ts, pages
 * shuffled: decode (GQA 1/3/4, several splits, odd lengths, head dims 64/32/128; four keys per step and
 * eight dims per lane, 64-key splits, 512-key splits past longRowKeys), decode with RoPE fused (the new K/V
 * quantized as they are written; the whole pool compared), rows that take rope.wgsl + the plain kernel,
 * prefill (several tiles, GQA, head dims 64/128, one row), sliding windows (decode and prefill, with and
 * without qk8). (Page sizes ≥ 9 where a 512-key split may be
 * taken: it spans at most 64 pages.) Without subgroups: attention_decode_test.ts; prefill with qk8 across
 * tile sizes: attention_prefill_test.ts.
 * Tolerance: as f16/f32 caches (attention_decode_test.ts, attention_prefill_test.ts): the kernels dequantize
 * to the reference's f32 values. K/V written into a q8 cache: the reference's codes, either code only for a
 * value within the kernel's f32 error (1e-6 + 2e-6·|x|) of a rounding boundary, and values within that error
 * on the block max plus a few f32 ulp (|d| ≤ 1e-6 + 2.5e-6·amax + 2^-23·|ref|; quantizeWritten,
 * kv8Tolerance in src/lab/cases/paged.ts). Attention is then checked over the K/V the kernel wrote.
 */
import { describe, test } from "vitest";
import type { DecodeAttentionProfile } from "../../src/gpu/profile.ts";
import { attentionDecodeCase } from "../../src/lab/cases/attention_decode.ts";
import { attentionPrefillCase } from "../../src/lab/cases/attention_prefill.ts";
import { decode, prefill } from "../util/attention.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`attention, ${path} activations`, () => {
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
      "q8 cache, decode: GQA 1, 3, 4; lengths up to 1001 (several splits), odd; head dims 64, 32, 128; " +
        "q8Profiles",
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
      "q8 cache, decode with RoPE fused: q/k norm, G 4 over 3 splits; G 6 with rot 40 of 64 and mscale; " +
        "length 1",
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
      "q8 cache, decode with RoPE, two keys per step: rows longer than fusedRopeMaxKeys 300 take " +
        "rope.wgsl + the plain kernel",
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
      // The fused kernel would bind 11; headless Chromium's limit of 10 is the real check
      // (test/web/web_test.ts).
      "q8 cache with q/k norm under a 10-storage-buffer limit (browsers): " +
        "RoPE by rope.wgsl, then the plain kernel",
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
      "q8 cache, sliding window 8 and 5: decode over 16-key splits (RoPE fused too); prefill with and " +
        "without qk8 over 16-key tiles, both kernels",
      on(path, async (gpu) => {
        const g = decode(gpu, { keysPerSplit: 16 });
        await expectCase(g, attentionDecodeCase, {
          D: 3,
          nq: 6,
          nkv: 2,
          hd: 64,
          ps: 9,
          len: 70,
          window: 8,
          kv8: 1,
        }, 54);
        await expectCase(g, attentionDecodeCase, {
          D: 2,
          nq: 8,
          nkv: 2,
          hd: 128,
          ps: 16,
          len: 45,
          rope: 1,
          rot: 128,
          window: 5,
          kv8: 1,
        }, 55);
        const small = { keysPerTile: 16, keysPerTileInt8QK: 16, keysPerTileQuad: 16 };
        for (const p of [small, { ...small, quad: false }]) {
          for (const qk8 of [1, 0]) {
            await expectCase(prefill(gpu, p), attentionPrefillCase, {
              S: 40,
              p0: 9,
              nq: 8,
              nkv: 2,
              hd: 128,
              ps: 7,
              row0: 1,
              kv8: 1,
              qk8,
              window: qk8 ? 5 : 8,
            }, 56);
          }
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
  });
}

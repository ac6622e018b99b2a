/**
 * Prefill attention with four query vectors per lane group (attention_prefill_quad.wgsl, profile `quad`; the
 * default for head dims 128 and 64 on an f16 adapter whose subgroups hold whole hd/16-lane groups), against
 * src/lab/ref/attention.ts:
 *  - f16 and q8 caches, GQA 4 over several tiles, GQA 6 (128 vectors per workgroup do not divide: idle
 *    vectors), GQA 1 with a single row, 1.6k keys, head dim 64 (GQA 3), query heads of sizes 16× apart (q8
 *    quantizes each vector's 32-dim blocks with its own scale, as the reference does);
 *  - its bits do not depend on the key tile (16, 32, 64 keys), as the scheduler's chunking requires;
 *  - it is the kernel taken: its bits differ from the two-vector kernel's (`quad: false`) on the same inputs,
 *    and with `hqk` from f32 q·k's.
 * Tolerance: as test/ops/attention_prefill_test.ts (f16 |d| ≤ 5e-4 + 2e-3·|ref| + 10·2^-11·Σw|v|, the last
 * term the f16 P·V's rounding bound; q8 the same over the dequantized cache, its reference quantizing q
 * alike; f16 with `hqk`, the engine's default, the same against a reference whose scores are summed as the
 * kernel sums them: q·scale in f16, chains of eight f16 fused multiply-adds).
 * A 1% error in a quarter of the P·V partials fails the checks (tried once, on both caches).
 */
import { describe, expect, test } from "vitest";
import { attentionPrefillCase } from "../../src/lab/cases/attention_prefill.ts";
import type { Gpu } from "../../src/gpu/device.ts";
import type { PrefillAttentionProfile } from "../../src/gpu/profile.ts";
import { devices, expectBitwise, expectCase, outputsOf } from "../util/lab.ts";

const { on } = devices();

const shapes = [
  { S: 70, p0: 101, nq: 8, nkv: 2, hd: 128, ps: 7, row0: 1 },
  { S: 37, p0: 13, nq: 12, nkv: 2, hd: 128, ps: 16, row0: 0 },
  { S: 1, p0: 300, nq: 4, nkv: 4, hd: 128, ps: 16, row0: 2 },
  // Head dim 64 (groups of 4 lanes, each keeping its vector's eight keys): GQA 3 over several tiles.
  { S: 45, p0: 37, nq: 6, nkv: 2, hd: 64, ps: 16, row0: 2 },
];
const long = { S: 40, p0: 1601, nq: 8, nkv: 2, hd: 128, ps: 16, row0: 0 };
const q8 = { kv8: 1, qk8: 1 };
const prefill = (gpu: Gpu, p: Partial<PrefillAttentionProfile>) => gpu.withProfile({ prefillAttention: p });

describe("prefill attention, four query vectors per lane group (quad)", () => {
  // The f16 cache runs with hqk (q·k on f16 FMAs, the engine's default; the reference sums the scores alike)
  // and without; q8 ignores it.
  for (const [cache, extra] of [["f16", { hqk: 1 }], ["f16", { hqk: 0 }], ["q8", q8]] as const) {
    test(
      `${cache} cache ${
        JSON.stringify(extra)
      }: the checks hold for GQA 4, 6 (idle vectors) and 1 (one row), over 1.6k keys, head dims 128 and 64`,
      on("f16", async (gpu) => {
        const g = prefill(gpu, { quad: true });
        for (const [i, shape] of shapes.entries()) {
          await expectCase(g, attentionPrefillCase, { ...shape, ...extra }, 61 + i);
        }
        await expectCase(g, attentionPrefillCase, { ...long, ...extra }, 64);
        // Query heads 16× apart in size: q8's per-vector quantization scale must be each vector's own.
        for (const hd of [128, 64]) {
          await expectCase(g, attentionPrefillCase, { ...shapes[0], hd, ...extra, qspread: 1 }, 66);
        }
      }),
    );
    test(
      `${cache} cache ${
        JSON.stringify(extra)
      }: bits independent of the key tile; not the two-vector kernel's`,
      on("f16", async (gpu) => {
        const info = gpu.info;
        const sg = info.subgroups && info.subgroupMinSize === info.subgroupMaxSize ? info.subgroupMinSize : 0;
        for (const shape of [...shapes, long].map((s) => ({ ...s, ...extra }))) {
          const taken = sg > 0 && sg % (shape.hd / 16) === 0;
          const base = await outputsOf(prefill(gpu, { quad: true }), attentionPrefillCase, shape, 65);
          for (const keysPerTileQuad of [16, 32]) {
            const got = await outputsOf(
              prefill(gpu, { quad: true, keysPerTileQuad }),
              attentionPrefillCase,
              shape,
              65,
            );
            expectBitwise(got.out, base.out, `quad ${JSON.stringify(shape)}: ${keysPerTileQuad}-key tiles`);
          }
          const two = await outputsOf(prefill(gpu, { quad: false }), attentionPrefillCase, shape, 65);
          const differs = base.out.some((x, i) => !Object.is(x, two.out[i]));
          // Where the adapter's subgroups cannot hold the 8-lane groups the two-vector kernel runs instead.
          expect(
            differs,
            `quad vs two-vector kernel on ${JSON.stringify(shape)} (subgroups of ${info.subgroupMinSize})`,
          ).toBe(taken);
          if ("hqk" in shape && shape.hqk) {
            // And f16 q·k ran: its bits differ from f32 q·k's.
            const f32qk = await outputsOf(prefill(gpu, { quad: true }), attentionPrefillCase, {
              ...shape,
              hqk: 0,
            }, 65);
            expect(
              base.out.some((x, i) => !Object.is(x, f32qk.out[i])),
              `hqk vs f32 q·k on ${JSON.stringify(shape)}`,
            ).toBe(taken);
          }
        }
      }),
    );
  }
});

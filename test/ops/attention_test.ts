/**
 * Attention over the paged cache against src/lab/ref/attention.ts, pages shuffled:
 *  - decode (attention_decode.wgsl + attention_combine.wgsl, split-K over 256 keys): GQA ratios 1, 3, 4,
 *    KV lengths over 256 (several splits), odd lengths, length 1, head dims 32/64/128, rows after row0;
 *    64/128-key splits (up to 40 to merge) and 256-lane workgroups;
 *  - prefill (attention_prefill.wgsl): segments longer than one query tile, several key tiles, segments
 *    starting at a non-zero position (earlier KV already cached), GQA, a segment of one row.
 * Tolerance: f32 |d| ≤ 2e-6 + 1e-4·|ref|; f16 |d| ≤ 5e-4 + 2e-3·|ref| (prefill rounds q·scale to f16).
 */
import { describe, test } from "vitest";
import { attentionDecodeCase, attentionPrefillCase } from "../../src/lab/cases/attention.ts";
import { setDecodeAttentionTuning } from "../../src/ops/attention.ts";
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
      "decode shapes the benchmark sweeps: 64- and 128-key splits (up to 40 splits to merge), 256-lane workgroups",
      on(path, async (gpu) => {
        for (const t of [{ split: 64, wg: 128 }, { split: 128, wg: 256 }, { split: 64, wg: 256 }]) {
          const prev = setDecodeAttentionTuning(t);
          try {
            await expectCase(gpu, attentionDecodeCase, { D: 2, nq: 8, nkv: 2, hd: 128, ps: 16, len: 2501 }, 7);
            await expectCase(gpu, attentionDecodeCase, { D: 3, nq: 6, nkv: 2, hd: 64, ps: 8, len: 199 }, 8);
          } finally {
            setDecodeAttentionTuning(prev);
          }
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

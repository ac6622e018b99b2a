/**
 * embed.wgsl through src/ops/embed.ts against src/lab/ref/embed.ts: quantized and 16-bit tables split into
 * row shards (one dispatch per shard; tokens at every shard edge), odd hidden sizes for 16-bit tables.
 * Tolerance: quantized |d| ≤ 1e-6 + 1e-6·|ref| (s·q + b in f32); f16/bf16 tables exact. The output is the
 * f32 residual on both activation paths.
 */
import { describe, test } from "vitest";
import { embedCase } from "../../src/lab/cases/embed.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`embed, ${path} activations`, () => {
    test(
      "quantized tables, 3 row shards, shard-edge tokens",
      on(path, async (gpu) => {
        for (
          const [k, s] of [
            { w: "q4g64", H: 320 },
            { w: "q3g32", H: 96 },
            { w: "q8g128", H: 384 },
            { w: "q2g32", H: 160 },
            { w: "q5g64", H: 192 },
            { w: "q6g32", H: 224 },
          ].entries()
        ) {
          await expectCase(
            gpu,
            embedCase,
            { ...s, scale: k % 2 ? "f16" : "bf16", R: 11, V: 1031, shards: 3 },
            k,
          );
        }
      }),
    );
    test(
      "16-bit tables with an odd hidden size (rows straddle words), 1 and 2 shards",
      on(path, async (gpu) => {
        await expectCase(gpu, embedCase, { w: "f16", H: 321, R: 9, V: 257, shards: 2 }, 1);
        await expectCase(gpu, embedCase, { w: "bf16", H: 75, R: 9, V: 131, shards: 2 }, 2);
        await expectCase(gpu, embedCase, { w: "bf16", H: 75, R: 9, V: 131, shards: 1, mul: 8 }, 5);
        await expectCase(gpu, embedCase, { w: "bf16", H: 1, R: 5, V: 67, shards: 1 }, 3);
      }),
    );
    test(
      "one row, one shard",
      on(path, async (gpu) => {
        await expectCase(gpu, embedCase, { w: "q4g32", H: 32, R: 1, V: 3, shards: 1 }, 4);
      }),
    );
  });
}

/**
 * The mixture-of-experts expert matmuls through src/ops/moe.ts against the float64 references
 * (src/lab/ref/moe.ts), on both activation paths: gate_up (SwiGLU of [gate | up]) and down, for decode rows
 * (moe_vec.wgsl) and prefill rows (moe_group.wgsl then moe_tiled.wgsl) in every supported format (MLX affine
 * 4-bit g32/g64/g128 and 8-bit g32/g64/g128 with bf16 or f16 scales, f16, bf16), odd column counts, row0 > 0,
 * routes where some experts get no pair and one spans several tiles, expert shards; batch invariance
 * (bitwise); the team reduction without subgroups. Every buffer of pairs has a row past the routed ones, and
 * the grouping buffer starts as a NaN pattern shared by consecutive groupings (no clearing). The tiled cases
 * cover both tile heights (64 rows, and 16 when experts average fewer than 48 pairs).
 * moe_vec's fusions for decode rows: gate_up with the RMSNorm of raw residual rows inside (every format,
 * against gate_up of the float64-normalised rows), and down adding the routed sum straight into the residual
 * (every format, with and without the shared expert, against down then combine in float64; and bitwise the
 * same as moeDown into y then moeCombine, for teams of 1 to 8 lanes, several column blocks per row, k·T past
 * one workgroup); both batch-invariant (bitwise), both on the workgroup-memory reduction too; the wrappers
 * refuse them where they cannot run (tiled mode, a sharded stack). The router and the combine alone are in
 * moe_test.ts.
 * 4-bit experts in vector mode run both on int8 x (moe_vec_x8.wgsl, shape key x8 = 1, the default where the
 * device allows it) and on f32 x (x8 = 0, moe_vec.wgsl): every test above of a 4-bit format, fused or not,
 * bitwise combine and batch invariance included; the profile's choice of kernel; rows of 1024 and 2048.
 * Tolerances (src/lab/cases/moe_matmul.ts), the same on both activation paths (x, h, y are f32 everywhere)
 * and on int8 x (its reference quantizes x as the kernel does: quantizeX8 of src/lab/ref/matmul.ts, the
 * normalised rows under the norm; the integer dots are exact, the rest is f32 arithmetic as on f32 x):
 *   gate_up:  |d| ≤ 4e-7·√K + 2e-6 + 3e-5·|ref| (f32 accumulation, then silu·up)
 *             with the norm: atol × 4 (normalised rows · gamma are about twice as large)
 *   down:     |d| ≤ 2e-7·√K + 1e-6 + 1e-5·|ref| (f32 accumulation)
 *             with the combine, on the residual: |d| ≤ k·(2e-7·√K + 1e-6 + 1e-5) + 2e-6 + 1e-5·|ref|
 *   grouping: counts, offsets, tile starts exact; order exact as a set per expert
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Gpu } from "../../src/gpu/device.ts";
import { bindMoeMatmul, makeMoeMatmul, moeTiledCase, moeVecCase } from "../../src/lab/cases/moe_matmul.ts";
import { moeGroupRef } from "../../src/lab/ref/moe.ts";
import { Rng } from "../../src/lab/rng.ts";
import { ShapeError } from "../../src/errors.ts";
import { moeDownCanCombine, moeTileRows } from "../../src/ops/moe.ts";
import { defaultProfile } from "../../src/gpu/profile.ts";
import type { Shape } from "../../src/lab/case.ts";
import type { ExpertLinear } from "../../src/ops/linear.ts";
import { devices, expectBitwise, expectCase } from "../util/lab.ts";
import { alone, FORMATS, FUSED, kernelsOf, opShape, outputsOf, x8s } from "../util/moe.ts";

const { on } = devices();

for (const path of ["f16", "f32"] as const) {
  describe(`moe expert matmuls, ${path} activations`, () => {
    for (const mode of ["vec", "tiled"] as const) {
      const c = mode === "vec" ? moeVecCase : moeTiledCase;
      // Tiled: E = 7, k = 3 averages under 48 pairs per expert (16-row tiles); E = 4, k = 2 over 130 rows
      // averages 65 (64-row tiles).
      const shapes = mode === "vec"
        ? [{ M: 1, E: 7, k: 3 }, { M: 3, E: 7, k: 3 }]
        : [{ M: 3, E: 7, k: 3 }, { M: 70, E: 7, k: 3 }, { M: 130, E: 4, k: 2 }];
      for (const op of ["gate_up", "down"] as const) {
        test(
          `${mode} ${op}: every format, ${shapes.map((r) => `M = ${r.M}`).join(", ")}, 37 columns, row0 > 0`,
          on(path, async (gpu) => {
            for (const [n, f] of FORMATS.entries()) {
              for (const r of shapes) {
                for (const x8 of x8s(f.w)) {
                  const s = { ...opShape(op, f.K), w: f.w, scale: f.scale, ...r, row0: 2, x8 };
                  await expectCase(gpu, c, s, n + r.M);
                }
              }
            }
          }),
        );
      }
      test(
        `${mode}: expert shards (E = 13 in 3 shards), k = 2, wider columns`,
        on(path, async (gpu) => {
          for (
            const [n, s] of [{ w: "q4g64", K: 192 }, { w: "q8g32", K: 160 }, { w: "bf16", K: 96 }].entries()
          ) {
            for (const op of ["gate_up", "down"] as const) {
              const shape = { ...opShape(op, s.K, 131), w: s.w, E: 13, k: 2, shards: 3 };
              await expectCase(gpu, c, { ...shape, M: mode === "vec" ? 3 : 71 }, 30 + n);
            }
          }
        }),
      );
    }

    test(
      "vec: many rows on few experts (blocks of 1-4 pairs per weight load, several blocks per expert)",
      on(path, async (gpu) => {
        for (const [n, f] of [FORMATS[0], FORMATS[4], FORMATS[8]].entries()) {
          for (const op of ["gate_up", "down"] as const) {
            for (const M of [2, 5, 9]) {
              const s = { ...opShape(op, f.K), w: f.w, scale: f.scale, E: 4, k: 2, M, row0: 1 };
              await expectCase(gpu, moeVecCase, s, 70 + n + M);
            }
          }
        }
      }),
    );

    test(
      "vec: long rows (teams of 8 and more lanes) for each format family",
      on(path, async (gpu) => {
        for (
          const [n, s] of [{ w: "q4g64", K: 1024 }, { w: "q8g128", K: 1024 }, { w: "f16", K: 512 }].entries()
        ) {
          for (const op of ["gate_up", "down"] as const) {
            await expectCase(gpu, moeVecCase, { ...opShape(op, s.K, 21), w: s.w, M: 2, row0: 0 }, 40 + n);
          }
        }
      }),
    );

    test(
      "tiled: a hot expert over three tiles or more, cold experts with no pair, row0 = 0, both tile heights",
      on(path, async (gpu) => {
        for (const [E, k] of [[4, 2], [13, 3]]) {
          const shape = { M: 141, row0: 0, E, k, w: "q4g64", H: 192, I: 37 };
          await expectCase(gpu, moeTiledCase, shape, 5);
          // The draw itself: some experts idle, one busy enough for 3 tiles.
          const i = makeMoeMatmul("tiled", { ...moeTiledCase.small, ...shape }, new Rng(5), {
            act: "f32",
            maxBinding: gpu.info.maxBinding,
          });
          const rows = moeTileRows(i.M * k, E);
          const g = moeGroupRef({ ...i, tileRows: rows });
          expect(rows).toBe(E === 4 ? 64 : 16);
          expect(g.counts.filter((n) => n === 0).length).toBeGreaterThan(0);
          expect(Math.max(...g.counts)).toBeGreaterThan(2 * rows);
        }
      }),
    );

    test(
      "batch invariance, vec: each row alone (M = 1) has the bits it has inside M = 3 and M = 9",
      on(path, async (gpu) => {
        for (const f of [FORMATS[0], FORMATS[4], FORMATS[7]]) {
          for (const op of ["gate_up", "down"] as const) {
            // E = 4, k = 2 over 9 rows: blocks of 4 pairs of one expert, and partial ones.
            for (const [M, E, x8] of [[3, 7], [9, 4]].flatMap(([M, E]) => x8s(f.w).map((x) => [M, E, x]))) {
              const s = { ...opShape(op, f.K), w: f.w, scale: f.scale, M, E, k: 2, row0: 0, x8 };
              const full = await outputsOf(gpu, "vec", s);
              const ones = await outputsOf(gpu, "vec", s, alone(M));
              expectBitwise(ones.y, full.y, `vec ${op} ${f.w} x8=${x8}: M=1 rows vs M=${M}`);
            }
          }
        }
      }),
    );

    test(
      "vec gate_up, RMSNorm fused (raw residual rows): every format, M = 1, M = 3, 37 columns, row0 > 0",
      on(path, async (gpu) => {
        for (const [n, f] of FORMATS.entries()) {
          for (const M of [1, 3]) {
            for (const x8 of x8s(f.w)) {
              const s = { ...opShape("gate_up", f.K), w: f.w, scale: f.scale, M, row0: 2, norm: 1, x8 };
              await expectCase(gpu, moeVecCase, s, 80 + n + M);
            }
          }
        }
      }),
    );

    test(
      "vec down, combine fused into the residual: every format, shared expert or not, M = 1, 3, " +
        "H = 37 and 131, row0 > 0",
      on(path, async (gpu) => {
        for (const [n, f] of FORMATS.entries()) {
          for (const [M, H] of [[1, 37], [3, 131]]) {
            for (const [shared, x8] of x8s(f.w).flatMap((x8) => [[0, x8], [1, x8]])) {
              const s = {
                ...opShape("down", f.K, H),
                w: f.w,
                scale: f.scale,
                M,
                row0: 2,
                combine: 1,
                shared,
                x8,
              };
              await expectCase(gpu, moeVecCase, s, 90 + n + M);
            }
          }
        }
      }),
    );

    test(
      "vec down, combine fused: bitwise the bits of moeDown into y then moeCombine (q4g64, bf16, q8g32; " +
        "shared or not; M = 1, 3; odd H; row0 > 0; teams of 1, 8 lanes and the wrappers' choice)",
      on(path, async (gpu) => {
        for (const f of [FORMATS[0], FORMATS[7], FORMATS[4]]) {
          for (const [M, H, k, E] of [[1, 37, 3, 7], [3, 131, 3, 7], [3, 1029, 8, 11]]) {
            for (const [shared, x8] of x8s(f.w).flatMap((x8) => [[0, x8], [1, x8]])) {
              // 0: the wrappers' choice; 1: fewer lanes than columns per workgroup (k·T < 4); 8: wide teams.
              for (const lanes of f.w === "q8g32" ? [0] : [0, 1, 8]) {
                const s = {
                  ...opShape("down", f.K, H),
                  w: f.w,
                  scale: f.scale,
                  M,
                  k,
                  E,
                  row0: 2,
                  combine: 1,
                };
                const t = { ...s, shared, lanes, x8 };
                const fused = await outputsOf(gpu, "vec", t);
                const split = await outputsOf(gpu, "vec", t, undefined, { split: true });
                expectBitwise(
                  fused.x,
                  split.x,
                  `combine ${f.w} ${JSON.stringify({ M, H, k, shared, lanes, x8 })}`,
                );
              }
            }
          }
        }
      }),
    );

    test(
      "batch invariance, vec fusions: each row alone (M = 1) has the bits it has inside M = 3 and M = 9 " +
        "(gate_up with the norm, down with the combine)",
      on(path, async (gpu) => {
        for (const f of [FORMATS[0], FORMATS[4], FORMATS[7]]) {
          for (const op of ["gate_up", "down"] as const) {
            for (const [M, E, x8] of [[3, 7], [9, 4]].flatMap(([M, E]) => x8s(f.w).map((x) => [M, E, x]))) {
              const fuse: Record<string, number> = op === "gate_up" ? { norm: 1 } : { combine: 1, shared: 1 };
              const s = { ...opShape(op, f.K), w: f.w, scale: f.scale, M, E, k: 2, row0: 0, x8, ...fuse };
              const full = await outputsOf(gpu, "vec", s);
              const ones = await outputsOf(gpu, "vec", s, alone(M));
              const out = op === "gate_up" ? "y" : "x";
              expectBitwise(ones[out], full[out], `vec ${op} fused ${f.w} x8=${x8}: M=1 rows vs M=${M}`);
            }
          }
        }
      }),
    );

    test(
      "vec: lanes per team given by the caller (1 to 8, and past the subgroup: rounded down), plain and fused",
      on(path, async (gpu) => {
        for (const lanes of [1, 2, 4, 8, 64]) {
          for (const [n, f] of [FORMATS[0], FORMATS[8]].entries()) {
            for (const { op, fuse } of FUSED) {
              for (const x8 of x8s(f.w)) {
                await expectCase(
                  gpu,
                  moeVecCase,
                  { ...opShape(op, f.K), w: f.w, lanes, x8, ...fuse },
                  100 + n,
                );
              }
            }
          }
        }
      }),
    );

    test(
      "batch invariance, tiled: a row's bits are the same in M = 130 (64-row tiles) as in blocks of " +
        "20 + 110 (16- then 64-row tiles) and 1 + 129",
      on(path, async (gpu) => {
        for (const f of [FORMATS[0], FORMATS[4], FORMATS[7]]) {
          for (const op of ["gate_up", "down"] as const) {
            const s = { ...opShape(op, f.K), w: f.w, scale: f.scale, M: 130, E: 4, k: 2, row0: 2 };
            const full = await outputsOf(gpu, "tiled", s);
            for (const parts of [[20, 110], [1, 129]]) {
              const blocks = await outputsOf(gpu, "tiled", s, [
                { M: parts[0], row0: 2 },
                { M: parts[1], row0: 2 + parts[0] },
              ]);
              expectBitwise(blocks.y, full.y, `tiled ${op} ${f.w}: blocks ${parts.join(" + ")} vs M=130`);
            }
          }
        }
      }),
    );
  });
}

describe("moe int8 x (moe_vec_x8.wgsl)", () => {
  test(
    "the profile picks the kernel: int8 x for 4-bit experts where allowed, else (or when off) moe_vec.wgsl",
    on("f32", async (gpu) => {
      const info = gpu.info, sub = info.subgroupMinSize;
      const int8 = info.int8Dot && info.subgroups && sub >= 4 && sub === info.subgroupMaxSize;
      expect(defaultProfile(info).moe.int8X).toBe(int8);
      for (const off of [{ int8Dot: false }, { subgroups: false }, { subgroupMaxSize: 2 * sub }]) {
        expect(defaultProfile({ ...info, ...off }).moe.int8X).toBe(false);
      }
      if (!gpu.profile.moe.int8X) return;
      const file = async (s: Shape) => (await kernelsOf(gpu, s)).map((l) => l.replace(/_[A-Z].*$/, ""));
      for (const { op, fuse } of FUSED) {
        const s = { ...opShape(op, 192), ...fuse };
        expect(await file({ ...s, x8: 1 })).toEqual(["moe_vec_x8"]);
        expect(await file({ ...s, x8: 0 })).toEqual(["moe_vec"]);
        expect(await file({ ...s, x8: 1, w: "q8g64" })).toEqual(["moe_vec"]);
      }
    }),
  );

  test(
    "long rows (several quantization passes per row, teams of 8+ lanes), plain and fused; bitwise combine",
    on("f32", async (gpu) => {
      for (const { op, fuse } of FUSED) {
        const s = {
          ...opShape(op, op === "gate_up" ? 2048 : 1024, 21),
          w: "q4g64",
          M: 3,
          k: 4,
          E: 9,
          ...fuse,
        };
        await expectCase(gpu, moeVecCase, s, 7);
      }
      const s = { ...opShape("down", 1024, 67), w: "q4g128", M: 2, k: 8, E: 11, combine: 1, row0: 1 };
      const fused = await outputsOf(gpu, "vec", s);
      const split = await outputsOf(gpu, "vec", s, undefined, { split: true });
      expectBitwise(fused.x, split.x, "int8-x combine, K = 1024, k = 8");
    }),
  );
});

describe("moe fusions: what the wrappers refuse", () => {
  const { on } = devices();
  test(
    "norm in tiled mode, combine in tiled mode or over a sharded stack",
    on("f32", async (gpu) => {
      const env = { act: "f32" as const, maxBinding: gpu.info.maxBinding };
      const make = (mode: "vec" | "tiled", op: "gate_up" | "down", more = {}) => {
        const c = mode === "vec" ? moeVecCase : moeTiledCase;
        return makeMoeMatmul(mode, { ...c.small, ...opShape(op, 192), ...more }, new Rng(1), env);
      };
      // The lab refuses the shapes...
      expect(() => make("tiled", "gate_up", { norm: 1 })).toThrow(ShapeError);
      expect(() => make("tiled", "down", { combine: 1 })).toThrow(ShapeError);
      expect(() => make("vec", "down", { combine: 1, E: 13, shards: 3 })).toThrow(ShapeError);
      // ...and the wrappers, given them anyway.
      const norm = make("vec", "gate_up", { norm: 1 }).norm;
      const combine = make("vec", "down", { combine: 1, E: 13 }).combine;
      await expect(bindMoeMatmul(gpu, { ...make("tiled", "gate_up"), norm })).rejects.toThrow(ShapeError);
      await expect(bindMoeMatmul(gpu, { ...make("tiled", "down"), combine })).rejects.toThrow(ShapeError);
      const sharded = make("vec", "down", { E: 13, shards: 3 });
      await expect(bindMoeMatmul(gpu, { ...sharded, combine })).rejects.toThrow(/one shard/);
      // moeDownCanCombine says so beforehand.
      const stack = (s: typeof sharded): ExpertLinear => ({
        name: "down",
        E: s.E,
        N: s.N,
        K: s.K,
        format: s.format,
        shards: s.shards.map((d) => ({ e0: d.e0, count: d.count, w: null as unknown as GPUBuffer })),
      });
      expect(moeDownCanCombine(gpu, stack(sharded), false)).toBe(false);
      expect(moeDownCanCombine(gpu, stack(make("vec", "down", { E: 13 })), true)).toBe(true);
    }),
  );
});

describe("moe without subgroups (workgroup-memory team sums)", () => {
  let gpu: Gpu;
  beforeAll(async () => {
    gpu = await Gpu.create({ subgroups: false });
  });
  afterAll(() => gpu?.destroy());

  test("vec and tiled, gate_up and down, short and long rows; vec batch invariance", async () => {
    expect(gpu.info.subgroups).toBe(false);
    for (const [n, s] of [{ w: "q4g64", K: 192 }, { w: "q4g64", K: 2048 }, { w: "bf16", K: 512 }].entries()) {
      for (const op of ["gate_up", "down"] as const) {
        const shape = { ...opShape(op, s.K, 21), w: s.w };
        await expectCase(gpu, moeVecCase, { ...shape, M: 3 }, 60 + n);
        if (s.K < 1024) await expectCase(gpu, moeTiledCase, { ...shape, M: 70 }, 60 + n);
        const full = await outputsOf(gpu, "vec", { ...shape, M: 3, row0: 0 });
        const ones = await outputsOf(gpu, "vec", { ...shape, M: 3, row0: 0 }, alone(3));
        expectBitwise(ones.y, full.y, `no subgroups, vec ${op} ${s.w} K=${s.K}: M=1 rows vs M=3`);
      }
    }
    expect(gpu.takeErrors()).toEqual([]);
  });

  test("vec fusions: norm, combine (bitwise as down then combine; teams past one workgroup: k·T = 320)", async () => {
    for (const [n, s] of [{ w: "q4g64", K: 192 }, { w: "q4g64", K: 2048 }, { w: "bf16", K: 512 }].entries()) {
      await expectCase(gpu, moeVecCase, { ...opShape("gate_up", s.K, 21), w: s.w, M: 3, norm: 1 }, 110 + n);
      for (const [k, E, lanes] of [[3, 7, 0], [10, 12, 32]]) {
        const shape = {
          ...opShape("down", s.K, 131),
          w: s.w,
          M: 3,
          row0: 1,
          k,
          E,
          lanes,
          combine: 1,
          shared: 1,
        };
        await expectCase(gpu, moeVecCase, shape, 110 + n);
        const fused = await outputsOf(gpu, "vec", shape);
        const split = await outputsOf(gpu, "vec", shape, undefined, { split: true });
        expectBitwise(fused.x, split.x, `no subgroups, combine ${s.w} K=${s.K} k=${k} lanes=${lanes}`);
      }
    }
    expect(gpu.takeErrors()).toEqual([]);
  });
});

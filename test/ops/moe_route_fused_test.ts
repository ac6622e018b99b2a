/**
 * A lone decode row routed inside its experts' gate|up (`moeGateUp` with `route`: moe_vec_x8.wgsl's ROUTE)
 * against the two dispatches it replaces (`moeRoute`, then `moeGateUp` reading the ids): the same ids, the
 * same routing weights and the same h, bit for bit, on 4-bit experts with the fused RMSNorm. The logits
 * carry exact ties (lower expert first) and rows around the routed one stay untouched. The shapes take
 * both router forms (one subgroup holds E ≤ 4 × the subgroup size and k ≤ it; a workgroup beyond). The
 * two-dispatch path is checked against float64 references in moe_test.ts and moe_matmul_test.ts; the ids are checked
 * against moeRouteRef here too.
 */
import { describe, expect, test } from "vitest";
import type { Gpu } from "../../src/gpu/device.ts";
import type { ExpertLinear } from "../../src/ops/linear.ts";
import { moeGateUp, moeGateUpRoutes } from "../../src/ops/moe.ts";
import { moeRoute } from "../../src/ops/moe_route.ts";
import { randomWeights } from "../../src/lab/cases/weights.ts";
import { BufferSet, readU32, runOnce, seal } from "../../src/lab/harness.ts";
import { moeRouteRef } from "../../src/lab/ref/moe.ts";
import { parseFormat } from "../../src/lab/ref/quant.ts";
import { Rng } from "../../src/lab/rng.ts";
import { devices } from "../util/lab.ts";

const { on } = devices();

interface Shape {
  E: number;
  k: number;
  K: number;
  I: number;
  row0: number;
  w: string;
  scale: "f16" | "bf16";
  renorm: boolean;
}

/** Runs one path over the same inputs; returns ids, weights and h as raw words. */
async function run(gpu: Gpu, s: Shape, seed: number, fused: boolean): Promise<Record<string, Uint32Array>> {
  const rng = new Rng(seed);
  const rows = s.row0 + 2;
  const format = parseFormat(s.w, s.scale);
  const logits = Float32Array.from({ length: rows * s.E }, () => rng.signed(4));
  for (let r = 0; r < rows; r++) {
    logits[r * s.E + s.E - 1] = Math.max(...logits.subarray(r * s.E, (r + 1) * s.E));
  }
  const x = Float32Array.from({ length: rows * s.K }, () => 7.5 * rng.signed(1));
  const gamma = Float32Array.from({ length: s.K }, () => 1 + rng.signed(0.5));
  const packed = randomWeights(rng, format, s.E * 2 * s.I, s.K, {
    amp: Math.sqrt(3 / s.K),
    minShards: 1,
    maxBinding: 2 ** 31,
  })[0].packed;
  const set = new BufferSet(gpu);
  const w: ExpertLinear = {
    name: "experts.gate_up",
    E: s.E,
    N: 2 * s.I,
    K: s.K,
    format,
    shards: [{
      e0: 0,
      count: s.E,
      w: set.upload("w", packed.w),
      scales: set.upload("scales", packed.scales!),
      biases: set.upload("biases", packed.biases!),
    }],
  };
  expect(moeGateUpRoutes(gpu, w, s.k)).toBe(true);
  const lg = set.upload("logits", logits);
  const ids = set.scratch("ids", rows * s.k * 4);
  const weights = set.scratch("weights", rows * s.k * 4);
  const h = set.scratch("h", rows * s.k * s.I * 4);
  const ctx = set.context();
  const rowArgs = { ids, M: 1, row0: s.row0, k: s.k, mode: "vec" as const };
  const norm = { weight: set.upload("gamma", gamma), eps: 1e-6 };
  const route = { logits: lg, weights, E: s.E, renormalize: s.renorm };
  if (!fused) await moeRoute(ctx, { ...route, ids, R: 1, row0: s.row0, k: s.k });
  const xb = set.upload("x", x);
  await moeGateUp(ctx, { ...rowArgs, x: xb, w, h, norm, ...(fused ? { route } : {}) });
  const b = seal(set, ctx, { maxKvLen: 1 }, () => Promise.resolve({}));
  runOnce(b);
  const out = {
    ids: Uint32Array.from(await readU32(gpu, ids, rows * s.k)),
    weights: Uint32Array.from(await readU32(gpu, weights, rows * s.k)),
    h: Uint32Array.from(await readU32(gpu, h, rows * s.k * s.I)),
  };
  const ref = moeRouteRef({
    logits: Float64Array.from(logits),
    R: 1,
    row0: s.row0,
    E: s.E,
    k: s.k,
    renormalize: s.renorm,
  });
  expect([...out.ids.subarray(s.row0 * s.k, (s.row0 + 1) * s.k)], "ids against moeRouteRef").toEqual(
    ref.ids[0],
  );
  b.destroy();
  return out;
}

for (const path of ["f16", "f32"] as const) {
  describe(`moe gate|up with the route fused, ${path} activations`, () => {
    test(
      "one decode row: ids, weights and h equal moeRoute then moeGateUp bitwise (E = 13, 32, 128, 512; ties)",
      on(path, async (gpu) => {
        const shapes: Shape[] = [
          { E: 13, k: 3, K: 64, I: 40, row0: 0, w: "q4g32", scale: "f16", renorm: true },
          { E: 32, k: 8, K: 128, I: 16, row0: 1, w: "q4g32", scale: "f16", renorm: false },
          { E: 128, k: 8, K: 256, I: 24, row0: 1, w: "q4g64", scale: "bf16", renorm: true },
          { E: 512, k: 10, K: 128, I: 20, row0: 2, w: "q4g64", scale: "f16", renorm: false },
        ];
        for (const [n, s] of shapes.entries()) {
          const apart = await run(gpu, s, 40 + n, false);
          const fused = await run(gpu, s, 40 + n, true);
          for (const key of ["ids", "weights", "h"]) {
            expect([...fused[key]], `${JSON.stringify(s)}: ${key}`).toEqual([...apart[key]]);
          }
        }
      }),
    );
  });
}

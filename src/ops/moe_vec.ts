/**
 * Vector-mode shapes of the expert matmuls (`moe_vec.wgsl`, recorded by src/ops/moe.ts): the team of lanes
 * per (pair, columns) and, for `moeDown` with `combine`, the workgroup and its column block.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { check } from "./context.ts";
import type { WeightFormat } from "./linear.ts";

/**
 * Team shape of `moe_vec.wgsl`: about 4 units of 16 bytes per lane, a power of two up to the subgroup size
 * (shuffles) or 32 (workgroup tree); or `lanes`, rounded down to such a power of two. It depends on the
 * format, K, the device and `lanes` only, never on the rows.
 */
export function vecShape(
  gpu: Gpu,
  f: WeightFormat,
  K: number,
  lanes?: number,
): { T: number; WG: number; shuffles: boolean } {
  const values = f.kind === "q" ? (f.bits === 4 ? 32 : 16) : 8;
  const units = K / values;
  const sub = gpu.info.subgroups ? gpu.info.subgroupMinSize : 0;
  const cap = sub >= 2 ? Math.min(32, sub) : 32;
  let T = 1;
  if (lanes === undefined) {
    while (T < cap && T * 4 < units) T *= 2;
  } else {
    check(Number.isInteger(lanes) && lanes >= 1, "moe", `lanes=${lanes} (an integer ≥ 1)`);
    while (T * 2 <= Math.min(cap, lanes)) T *= 2;
  }
  return { T, WG: 128, shuffles: sub >= 2 && T > 1 };
}

/** Lanes per workgroup at most of the combining down kernel (every WebGPU device has 256). */
const COMBINE_MAX_WG = 256;

/**
 * Workgroup shape of `moe_vec.wgsl` under COMBINE for teams of T lanes: CB = 4·G columns of one row, a team
 * per (pair, 4 columns), so k·T lanes per 4 columns. G doubles until the workgroup has at least 128 lanes in
 * whole warps of 32 (about the lanes per workgroup of the separate kernel, so as many workgroups in flight),
 * stopping at 256 lanes or once the workgroup spans every column. Past 256 lanes for one G, teams take
 * several items each. The workgroup has a lane per column at least (each sums one).
 */
export function combineShape(k: number, T: number, N: number): { WG: number; CB: number } {
  const per = k * T;
  if (per > COMBINE_MAX_WG) return { WG: COMBINE_MAX_WG, CB: 4 };
  let G = 1;
  const room = (g: number) => g * per <= COMBINE_MAX_WG && 4 * g <= COMBINE_MAX_WG;
  while ((G * per < 128 || (G * per) % 32 !== 0) && room(2 * G) && 4 * G < N) G *= 2;
  return { WG: Math.max(G * per, 4 * G), CB: 4 * G };
}

/**
 * Vector-mode shapes of the expert matmuls (`moe_vec.wgsl`, recorded by src/ops/moe.ts): the team of lanes
 * per (pair, columns) and, for `moeDown` with `combine`, the workgroup and its column block; and the choice
 * of the int8-x kernel for 4-bit experts (`moe_vec_x8.wgsl`) with its defines.
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import type { Defines } from "../gpu/preprocess.ts";
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

/** Lanes per workgroup of `moe_vec_x8.wgsl`. */
export const X8_WG = 128;
/**
 * Columns per workgroup of `moe_vec_x8.wgsl` under COMBINE (each quantizes the row's k pair rows once): the
 * profile's `moe.downColumns`, a multiple of 4 from 4 to X8_WG.
 */
export function x8CombineCols(gpu: Pick<Gpu, "profile">): number {
  const c = gpu.profile.moe.downColumns;
  check(
    Number.isInteger(c) && c >= 4 && c <= X8_WG && c % 4 === 0,
    "moe",
    `downColumns=${c} (4..${X8_WG}, ×4)`,
  );
  return c;
}

/**
 * Whether the routers route a row on one subgroup alone (lib/topk.wgsl's TOPK_ONE_SUBGROUP): the profile's
 * `moe.oneSubgroupRoute`, fixed-size subgroups holding the E experts four per lane and the k picks one per
 * lane. `moe_route.wgsl` and the int8-x gate|up's ROUTE decide it here, so a decode row gets the same bits
 * from either.
 */
export function routesOnOneSubgroup(gpu: Pick<Gpu, "info" | "profile">, E: number, k: number): boolean {
  const { subgroups, subgroupMinSize: sub, subgroupMaxSize } = gpu.info;
  return gpu.profile.moe.oneSubgroupRoute && subgroups && sub >= 4 && sub === subgroupMaxSize &&
    E <= 4 * sub && k <= sub;
}

/**
 * Whether the vector-mode expert matmuls of this stack take int8 x (`moe_vec_x8.wgsl`): 4-bit weights with K
 * a multiple of 32 and of the group, the profile's `moe.int8X`, dot4I8Packed and fixed-size subgroups, and
 * `rows` rows of int8 x in workgroup memory: 4 for gate_up, max(4, k) for down (its COMBINE quantizes the
 * row's k pair rows), so down into y and down with the combine take the same path. It depends on the stack,
 * k and the device only, never on the rows.
 */
export function moeUsesInt8X(
  gpu: Pick<Gpu, "info" | "profile">,
  f: WeightFormat,
  K: number,
  rows: number,
): boolean {
  const info = gpu.info;
  if (!gpu.profile.moe.int8X || f.kind !== "q" || f.bits !== 4 || K % 32 !== 0 || K % f.groupSize !== 0) {
    return false;
  }
  const sub = info.subgroupMinSize;
  if (!info.int8Dot || !info.subgroups || sub < 4 || sub !== info.subgroupMaxSize) return false;
  // Int8 x and (sx, Σx) per chunk; NORM's partial Σx² per (slot, subgroup); COMBINE's products and weights.
  const bytes = rows * K + rows * (K / 32) * 8 + 16 * Math.ceil(X8_WG / sub) +
    4 * (16 * x8CombineCols(gpu) + 16);
  return bytes <= info.maxWorkgroupStorage;
}

/**
 * The kernel of a vector-mode expert matmul for teams of v.T lanes in workgroups of v.WG: `moe_vec_x8.wgsl`
 * with `x8Rows` rows of int8 x (> 0), else `moe_vec.wgsl`; `defines` holds the format's and the op's.
 */
export function vecKernel(
  gpu: Pick<Gpu, "info">,
  f: WeightFormat,
  K: number,
  v: { T: number; WG: number; shuffles: boolean },
  defines: Defines,
  x8Rows: number,
  more: Record<string, number> = {},
): { file: string; defines: Defines; overrides: Record<string, number> } {
  const gs: Record<string, number> = f.kind === "q" ? { GS: f.groupSize } : {};
  const overrides = { ...gs, WG: v.WG, T: v.T, ...more };
  if (x8Rows <= 0) {
    return {
      file: "moe_vec.wgsl",
      defines: { ...defines, ...(v.shuffles ? { TEAM_SUBGROUP: 1 } : {}) },
      overrides,
    };
  }
  return {
    file: "moe_vec_x8.wgsl",
    defines: { ...defines, INT8_X_VEC4S: K / 16, X8_ROWS: x8Rows },
    overrides: { ...overrides, SGS: gpu.info.subgroupMinSize },
  };
}

/**
 * Host wrapper of the mixture-of-experts router's top-k (`moe_route.wgsl`, its code in wgsl/lib/topk.wgsl,
 * which `moeGateUp`'s `route` runs too): from router logits to ids (rows, k) u32 and weights (rows, k) f32
 * for the expert matmuls.
 *
 * @example The rows of a step, after the router matmul wrote their logits:
 * ```ts
 * await moeRoute(ctx, { logits, ids, weights, R, row0: 0, E, k, renormalize: true });
 * ```
 * @module
 */
import { grid1d, type KernelSpec } from "../gpu/kernel.ts";
import { check, type OpContext, record } from "./context.ts";
import { MOE_MAX_EXPERTS, MOE_MAX_K } from "./moe.ts";
import { routesOnOneSubgroup, X8_WG } from "./moe_vec.ts";

/**
 * Router from logits: for rows row0 .. row0 + R − 1, softmax over the E logits (f32, max subtracted), the
 * k largest probabilities in descending order (ties: lower expert first) into ids and weights, the latter
 * divided by their sum when `renormalize` (HF `norm_topk_prob`).
 */
export async function moeRoute(
  ctx: OpContext,
  a: {
    logits: GPUBuffer;
    ids: GPUBuffer;
    weights: GPUBuffer;
    R: number;
    row0: number;
    E: number;
    k: number;
    renormalize: boolean;
  },
): Promise<void> {
  check(a.E >= 1 && a.E <= MOE_MAX_EXPERTS, "moeRoute", `E=${a.E} (1..${MOE_MAX_EXPERTS})`);
  check(a.k >= 1 && a.k <= Math.min(MOE_MAX_K, a.E), "moeRoute", `k=${a.k} with E=${a.E}`);
  check(a.R >= 1, "moeRoute", `R=${a.R}`);
  // One subgroup where it holds the row, else the int8-x gate|up kernel's workgroup and, with fixed-size
  // subgroups, its subgroup reductions: its `route` gives a decode row these same bits.
  const { subgroups, subgroupMinSize: sub, subgroupMaxSize } = ctx.gpu.info;
  const fixed = subgroups && sub >= 4 && sub === subgroupMaxSize;
  const one = routesOnOneSubgroup(ctx.gpu, a.E, a.k);
  const spec: KernelSpec = one
    ? { file: "moe_route.wgsl", defines: { TOPK_ONE_SUBGROUP: 1 }, overrides: { WG: sub, SGS: sub } }
    : fixed
    ? { file: "moe_route.wgsl", defines: { TOPK_SUBGROUPS: 1 }, overrides: { WG: X8_WG, SGS: sub } }
    : { file: "moe_route.wgsl", overrides: { WG: X8_WG } };
  await record(ctx, spec, {
    buffers: { logits: a.logits, ids: a.ids, weights: a.weights },
    params: { row0: a.row0, E: a.E, k: a.k, renorm: a.renormalize ? 1 : 0 },
    grid: grid1d(a.R),
  });
}

/**
 * Host wrappers of the mixture-of-experts kernels (the routers: moe_route.ts): the grouping of a prefill
 * step's pairs by expert (`moe_group.wgsl`), the expert matmuls for decode-like rows (`moe_vec.wgsl`: each
 * pair reads only its own expert's weights; 4-bit experts on int8 x, `moe_vec_x8.wgsl`, where the profile's
 * `moe.int8X` and the device allow) and for prefill rows (`moe_tiled.wgsl`: tiles of one expert's
 * pairs), and the weighted combine into the residual (`moe_combine.wgsl`).
 *
 * Rows are absolute step rows; row r routes to k experts, pair p = r·k + j. Buffers of pairs are sized
 * (row capacity · k, …) and indexed by p. Like the dense matmuls, the caller picks the mode by row kind,
 * never by count: a row's bits are the same alone or among others in the same mode.
 *
 * @example One MoE MLP of a prefill chunk (rows row0 .. row0 + M − 1):
 * ```ts
 * await moeRoute(ctx, { logits, ids, weights, R: M, row0, E, k, renormalize: true });   // moe_route.ts
 * await moeGroup(ctx, { ids, M, row0, k, E, groups });
 * await moeGateUp(ctx, { x, w: gateUp, ids, h, M, row0, k, mode: "tiled", groups });
 * await moeDown(ctx, { h, w: down, ids, y, M, row0, k, mode: "tiled", groups });
 * await moeCombine(ctx, { y, weights, x: residual, M, row0, k, H });
 * ```
 * @example Decode rows 0 .. D − 1 (vector mode), the RMSNorm fused into gate_up and the combine into down:
 * ```ts
 * const rows = { ids, M: D, row0: 0, k, mode: "vec" as const };
 * await moeGateUp(ctx, { ...rows, x: residual, w: gateUp, h, norm: { weight: ln, eps } });
 * await moeDown(ctx, { ...rows, h, w: down, combine: { weights, x: residual } });
 * ```
 * @module
 */
import type { Gpu } from "../gpu/device.ts";
import { type BufferResource, grid1d } from "../gpu/kernel.ts";
import type { Defines } from "../gpu/preprocess.ts";
import { check, type OpContext, record } from "./context.ts";
import type { ExpertLinear, WeightFormat } from "./linear.ts";
import {
  combineShape,
  moeUsesInt8X,
  routesOnOneSubgroup,
  vecKernel,
  vecShape,
  X8_WG,
  x8CombineCols,
} from "./moe_vec.ts";

/** Most experts the router and the grouping take (their workgroup arrays). */
export const MOE_MAX_EXPERTS = 512;
/** Most experts per row the router picks. */
export const MOE_MAX_K = 16;
/** Average pairs per expert below which the grouped matmul takes 16-row tiles instead of 64. */
const SMALL_TILE_BELOW = 48;

/**
 * Pair rows per tile of the grouped matmul (`BM` in wgsl/lib/moe.wgsl): 64, or 16 when experts average
 * fewer than 48 pairs (fine-grained experts, short chunks) and 64-row tiles would be mostly padding. Both
 * shapes give every output the same bits, so the choice may follow M; `moeGroup` and the matmuls of the
 * same rows make the same one.
 */
export function moeTileRows(pairs: number, E: number): number {
  return pairs < SMALL_TILE_BELOW * E ? 16 : 64;
}

function tileDefines(pairs: number, E: number): Defines {
  const rows = moeTileRows(pairs, E);
  return rows === 16 ? { TILE_ROWS: 16, SMALL_TILE: 1 } : { TILE_ROWS: 64 };
}

/**
 * GPU-side grouping of a prefill step's pairs by expert (layout in wgsl/lib/moe.wgsl): per expert its
 * count, first slot and first tile, then the pair indices sorted by expert. `moeGroup` rewrites every
 * section, so one allocation serves every layer and step without clearing.
 */
export interface MoeGroups {
  buffer: GPUBuffer;
  /** Pairs one grouping may hold (row capacity · k). */
  maxPairs: number;
  E: number;
  destroy(): void;
}

/** Groups buffers for up to `maxPairs` pairs over E experts (booked as activations). */
export function allocMoeGroups(gpu: Gpu, maxPairs: number, E: number): MoeGroups {
  check(E >= 1 && E <= MOE_MAX_EXPERTS, "allocMoeGroups", `E=${E} (1..${MOE_MAX_EXPERTS})`);
  check(maxPairs >= 1, "allocMoeGroups", `maxPairs=${maxPairs}`);
  const words = 3 * E + 1 + maxPairs;
  const buffer = gpu.memory.create("activations", {
    label: "moe.groups",
    size: Math.ceil((words * 4) / 16) * 16,
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
  });
  return { buffer, maxPairs, E, destroy: () => gpu.memory.destroy(buffer) };
}

/** Frees a groups allocation (the same as `groups.destroy()`). */
export function destroyMoeGroups(groups: MoeGroups): void {
  groups.destroy();
}

/**
 * Prefill only: groups the pairs of rows row0 .. row0 + M − 1 by expert into `groups`, on the GPU (one
 * workgroup; no read-back). `moeGateUp`/`moeDown` in tiled mode then read it for the same rows.
 */
export async function moeGroup(
  ctx: OpContext,
  a: { ids: GPUBuffer; M: number; row0: number; k: number; E: number; groups: MoeGroups },
): Promise<void> {
  const pairs = a.M * a.k;
  check(a.M >= 1 && a.k >= 1, "moeGroup", `M=${a.M}, k=${a.k}`);
  check(a.E === a.groups.E, "moeGroup", `E=${a.E}, groups for E=${a.groups.E}`);
  check(pairs <= a.groups.maxPairs, "moeGroup", `M·k=${pairs} > groups for ${a.groups.maxPairs} pairs`);
  await record(ctx, { file: "moe_group.wgsl", defines: tileDefines(pairs, a.E), overrides: { WG: 256 } }, {
    buffers: { ids: a.ids, groups: a.groups.buffer },
    params: { P0: a.row0 * a.k, pairs, E: a.E },
    grid: [1, 1, 1],
  });
}

/** Arguments shared by the two expert matmuls. */
interface ExpertArgs {
  w: ExpertLinear;
  /** (rows, k) u32 expert ids from `moeRoute`. */
  ids: GPUBuffer;
  M: number;
  row0: number;
  k: number;
  /** "vec": decode-like rows, only the routed experts' weights are read; "tiled": prefill rows. */
  mode: "vec" | "tiled";
  /** Tiled mode: filled by `moeGroup` for the same rows. */
  groups?: MoeGroups;
  /**
   * Vector mode: lanes per team (rounded down to a power of two of at most 32, and at most the subgroup size
   * where teams sum by shuffles); absent: chosen from the format and K. A pair's bits depend on it, so the
   * fused and the separate paths of the same rows agree bitwise only with the same value.
   */
  lanes?: number;
}

/** RMSNorm fused into `moeGateUp`'s x loads (vector mode): x̂ = x·rsqrt(mean(x²) + eps)·weight. */
export interface MoeGateUpNorm {
  /** (K) f32 RMSNorm weight (gamma). */
  weight: GPUBuffer;
  eps: number;
}

/**
 * `moeGateUp` routing its one decode row itself (vector mode, M = 1): every workgroup ranks the row's router
 * logits as `moeRoute` does (the same bits) and serves its pair; ids and weights are written for `moeDown`.
 * Only where `moeGateUpRoutes` says so.
 */
export interface MoeGateUpRoute {
  /** (rows, E) f32 router logits. */
  logits: GPUBuffer;
  /** (rows, k) f32 routing weights, written. */
  weights: GPUBuffer;
  E: number;
  renormalize: boolean;
}

/**
 * Whether `moeGateUp` can take `route` for this stack: the int8-x kernel (its workgroup is the router's),
 * one shard holding every expert, E and k within the router's limits.
 */
export function moeGateUpRoutes(gpu: Gpu, w: ExpertLinear, k: number): boolean {
  const s = w.shards;
  return moeUsesInt8X(gpu, w.format, w.K, 4) && s.length === 1 && s[0].e0 === 0 && s[0].count === w.E &&
    w.E <= MOE_MAX_EXPERTS && k <= MOE_MAX_K && 9 <= gpu.info.maxStorageBuffers;
}

/** `moeDown` adding the routed sum into the residual instead of writing y (vector mode). */
export interface MoeDownCombine {
  /** (rows, k) f32 routing weights from `moeRoute`. */
  weights: GPUBuffer;
  /** (rows, H) f32 residual, read and written. */
  x: GPUBuffer;
  /** Qwen3-Next's gated shared expert: its output (rows, H) f32 and gate logits (rows) f32. */
  shared?: { y: GPUBuffer; gate: GPUBuffer };
}

/**
 * h[p, i] = silu(x_r·W_e[i]) · (x_r·W_e[I + i]) for the pairs p of rows row0 .. row0 + M − 1 (e = ids[p],
 * W_e = [gate | up], N = 2I): x (rows, K) f32 indexed by row, h (rows·k, I) f32 indexed by pair.
 * `norm` (vector mode): x is the raw residual and each row is RMS-normalised (· weight) inside the kernel,
 * as `matmul_vec.wgsl`'s NORM does, so decode rows need no separate rms_norm dispatch.
 */
export async function moeGateUp(
  ctx: OpContext,
  a: ExpertArgs & { x: GPUBuffer; h: GPUBuffer; norm?: MoeGateUpNorm; route?: MoeGateUpRoute },
): Promise<void> {
  check(a.w.N % 2 === 0, "moeGateUp", `${a.w.name}: N=${a.w.N} must be even ([gate | up])`);
  check(!a.norm || a.mode === "vec", "moeGateUp", `${a.w.name}: the fused norm is for vector mode only`);
  if (a.route) {
    check(
      a.mode === "vec" && a.M === 1 && a.route.E === a.w.E && moeGateUpRoutes(ctx.gpu, a.w, a.k),
      "moeGateUp",
      `${a.w.name}: route takes one vector-mode row and a stack moeGateUpRoutes accepts (M=${a.M})`,
    );
  }
  await expertMatmul(ctx, a, { x: a.x, y: a.h, gateUp: true, norm: a.norm, route: a.route });
}

/**
 * y[p, n] = h_p · W_e[n] for the pairs of rows row0 .. row0 + M − 1: h (rows·k, I), y (rows·k, H) f32.
 * `combine` (vector mode; y is then neither needed nor written): x[r, n] += Σ_j weights[r, j]·(h_{r·k+j} ·
 * W_e[n]) (j in order) (+ sigmoid(shared.gate[r])·shared.y[r, n]): `moeCombine`'s arithmetic and order, so
 * x gets the bits of this op into y followed by `moeCombine` (with the same `lanes`). Needs one shard holding
 * every expert and enough storage bindings (`moeDownCanCombine`).
 */
export async function moeDown(
  ctx: OpContext,
  a: ExpertArgs & { h: GPUBuffer; y?: GPUBuffer; combine?: MoeDownCombine },
): Promise<void> {
  if (a.combine) return await downCombine(ctx, a, a.combine);
  check(!!a.y, "moeDown", `${a.w.name}: give y, or combine`);
  await expertMatmul(ctx, a, { x: a.h, y: a.y!, gateUp: false });
}

/**
 * Whether `moeDown` can take `combine` for this stack on this device: one shard holding every expert (the
 * row's pairs are summed in one dispatch) and bindings enough for the residual, the routing weights and,
 * with `shared`, the shared expert's output and gate.
 */
export function moeDownCanCombine(gpu: Gpu, w: ExpertLinear, shared: boolean): boolean {
  const s = w.shards;
  const buffers = (w.format.kind === "q" ? 7 : 5) + (shared ? 2 : 0);
  return s.length === 1 && s[0].e0 === 0 && s[0].count === w.E && buffers <= gpu.info.maxStorageBuffers;
}

/**
 * x[r, n] += Σ_j weights[r, j]·y[r·k + j, n] (j in order), + sigmoid(shared.gate[r])·shared.y[r, n] when
 * `shared` is given (Qwen3-Next's gated shared expert), for rows row0 .. row0 + M − 1; x (rows, H) f32.
 */
export async function moeCombine(
  ctx: OpContext,
  a: {
    y: GPUBuffer;
    weights: GPUBuffer;
    x: GPUBuffer;
    M: number;
    row0: number;
    k: number;
    H: number;
    shared?: { y: GPUBuffer; gate: GPUBuffer };
  },
): Promise<void> {
  check(a.M >= 1 && a.k >= 1 && a.H >= 1, "moeCombine", `M=${a.M}, k=${a.k}, H=${a.H}`);
  const WG = 256;
  const buffers: Record<string, BufferResource> = { y: a.y, weights: a.weights, x: a.x };
  if (a.shared) Object.assign(buffers, { sy: a.shared.y, gate: a.shared.gate });
  await record(ctx, {
    file: "moe_combine.wgsl",
    defines: a.shared ? { SHARED: 1 } : {},
    overrides: { WG },
  }, {
    buffers,
    params: { M: a.M, row0: a.row0, k: a.k, H: a.H },
    grid: grid1d(Math.ceil((a.M * a.H) / WG)),
  });
}

/** One dispatch per shard of `w` (pairs whose expert is in another shard are skipped by it). */
async function expertMatmul(
  ctx: OpContext,
  a: ExpertArgs,
  io: { x: GPUBuffer; y: GPUBuffer; gateUp: boolean; norm?: MoeGateUpNorm; route?: MoeGateUpRoute },
): Promise<void> {
  const { w, M, k } = a;
  const op = io.gateUp ? "moeGateUp" : "moeDown";
  const pairs = M * k;
  check(M >= 1 && k >= 1, op, `${w.name}: M=${M}, k=${k}`);
  check(w.K % 32 === 0, op, `${w.name}: K=${w.K} must be a multiple of 32`);
  check(w.shards.length > 0, op, `${w.name}: no shards`);
  const defines: Defines = { ...formatDefines(w.format, w.K, op, w.name) };
  if (io.gateUp) defines.GATE_UP = 1;
  const overrides: Record<string, number> = w.format.kind === "q" ? { GS: w.format.groupSize } : {};
  const cols = io.gateUp ? w.N / 2 : w.N;
  const kdiv = io.gateUp ? k : 1;
  for (const s of w.shards) {
    const buffers: Record<string, BufferResource> = { x: io.x, w: s.w, y: io.y };
    if (s.scales) buffers.scales = s.scales;
    if (s.biases) buffers.biases = s.biases;
    const params = { K: w.K, N: w.N, cols, e0: s.e0, count: s.count, kdiv };
    if (a.mode === "vec") {
      check(pairs <= 65535, op, `${w.name}: vector mode takes at most 65535 pairs (M·k=${pairs})`);
      const v = vecShape(ctx.gpu, w.format, w.K, a.lanes);
      // 4-bit experts on int8 x where the device allows (down: rows for its COMBINE too, see moeUsesInt8X).
      const x8 = moeUsesInt8X(ctx.gpu, w.format, w.K, io.gateUp ? 4 : Math.max(4, k));
      const WG = x8 ? X8_WG : v.WG;
      const perWg = (WG / v.T) * (io.gateUp ? 2 : 4);
      const r = io.route;
      const one: Defines = r && routesOnOneSubgroup(ctx.gpu, r.E, k) ? { TOPK_ONE_SUBGROUP: 1 } : {};
      const kdefs = { ...defines, ...(io.norm ? { NORM: 1 } : {}), ...(r ? { ROUTE: 1, ...one } : {}) };
      await record(
        ctx,
        vecKernel(ctx.gpu, w.format, w.K, { ...v, WG }, kdefs, x8 ? 4 : 0),
        {
          buffers: {
            ...buffers,
            ids: a.ids,
            ...(io.norm ? { gamma: io.norm.weight } : {}),
            ...(r ? { logits: r.logits, weights: r.weights } : {}),
          },
          params: {
            ...params,
            P0: a.row0 * k,
            pairs,
            ...(io.norm ? { eps: io.norm.eps } : {}),
            ...(r ? { E: r.E, renorm: r.renormalize ? 1 : 0 } : {}),
          },
          grid: [Math.ceil(cols / perWg), pairs, 1],
        },
      );
    } else {
      const g = a.groups;
      check(!!g, op, `${w.name}: tiled mode needs the groups from moeGroup`);
      check(g!.E === w.E, op, `${w.name}: E=${w.E}, groups for E=${g!.E}`);
      check(pairs <= g!.maxPairs, op, `${w.name}: M·k=${pairs} > groups for ${g!.maxPairs} pairs`);
      // Tiles are at most ceil(pairs / BM) + E (each expert's last tile may be partial).
      const tiles = Math.ceil(pairs / moeTileRows(pairs, w.E)) + w.E;
      check(tiles <= 65535, op, `${w.name}: ${tiles} tiles exceed the grid limit`);
      await record(ctx, {
        file: "moe_tiled.wgsl",
        defines: { ...defines, ...tileDefines(pairs, w.E) },
        overrides,
      }, {
        buffers: { ...buffers, groups: g!.buffer },
        params: { ...params, E: w.E },
        grid: [Math.ceil(cols / (io.gateUp ? 64 : 128)), tiles, 1],
      });
    }
  }
}

/** Kernel defines of an expert or router weight format: 4- and 8-bit MLX affine, f16, bf16. */
export function formatDefines(f: WeightFormat, K: number, op: string, name: string): Defines {
  if (f.kind === "f16") return { WF16: 1 };
  if (f.kind === "bf16") return { WBF16: 1 };
  check(f.bits === 4 || f.bits === 8, op, `${name}: ${f.bits}-bit experts (4 and 8 are supported)`);
  check(
    [32, 64, 128].includes(f.groupSize) && K % f.groupSize === 0,
    op,
    `${name}: group size ${f.groupSize} with K=${K}`,
  );
  return { QUANT: 1, [f.bits === 4 ? "Q4" : "Q8"]: 1, ...(f.scaleF16 ? { SCALE_F16: 1 } : {}) };
}

/** moeDown with `combine`: one dispatch over (column blocks, rows), the sum added into the residual. */
async function downCombine(
  ctx: OpContext,
  a: ExpertArgs & { h: GPUBuffer },
  c: MoeDownCombine,
): Promise<void> {
  const { w, M, k } = a;
  const op = "moeDown";
  check(a.mode === "vec", op, `${w.name}: combine is for vector mode only`);
  check(M >= 1 && M <= 65535, op, `${w.name}: M=${M} (1..65535)`);
  check(k >= 1 && k <= MOE_MAX_K, op, `${w.name}: k=${k} (1..${MOE_MAX_K})`);
  check(w.K % 32 === 0, op, `${w.name}: K=${w.K} must be a multiple of 32`);
  check(
    moeDownCanCombine(ctx.gpu, w, !!c.shared),
    op,
    `${w.name}: combine needs one shard holding every expert (${w.shards.length} shards) and storage ` +
      `bindings enough (${ctx.gpu.info.maxStorageBuffers})`,
  );
  const s = w.shards[0];
  const v = vecShape(ctx.gpu, w.format, w.K, a.lanes);
  // The int8-x path as moeDown into y takes it (the same pair bits), quantizing the row's k pairs once.
  const x8 = moeUsesInt8X(ctx.gpu, w.format, w.K, Math.max(4, k));
  const { WG, CB } = x8 ? { WG: X8_WG, CB: x8CombineCols(ctx.gpu) } : combineShape(k, v.T, w.N);
  check(Math.ceil(w.N / CB) <= 65535, op, `${w.name}: N=${w.N} needs more than 65535 workgroups`);
  const buffers: Record<string, BufferResource> = { x: a.h, w: s.w, ids: a.ids, xr: c.x, weights: c.weights };
  if (s.scales) buffers.scales = s.scales;
  if (s.biases) buffers.biases = s.biases;
  if (c.shared) Object.assign(buffers, { sy: c.shared.y, gate: c.shared.gate });
  const defines = {
    ...formatDefines(w.format, w.K, op, w.name),
    COMBINE: 1,
    ...(c.shared ? { SHARED: 1 } : {}),
  };
  await record(
    ctx,
    vecKernel(ctx.gpu, w.format, w.K, { ...v, WG }, defines, x8 ? k : 0, { CB }),
    {
      buffers,
      params: { row0: a.row0, k, K: w.K, N: w.N },
      grid: [Math.ceil(w.N / CB), M, 1],
    },
  );
}

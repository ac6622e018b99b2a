/**
 * Kernel tuning as data: the shape choices of the matmul and attention kernels (workgroup and tile sizes,
 * splits, thresholds, and the variants a device may prefer off), one typed object per device.
 * `defaultProfile` chooses it from the adapter; `GpuOptions.profile` and `Gpu.withProfile` override it (the
 * benchmark, the kernel lab, tests). Host wrappers read `ctx.gpu.profile` and still check what the device can
 * run, so a profile can make a kernel slower, never wrong. A new GPU or backend brings its own values here.
 * @module
 */
import { ValidationError } from "../errors.ts";
import type { GpuInfo } from "./device.ts";

/** Matmul kernels: decode rows take the vector kernels, prefill rows the tiled ones (src/ops/matmul.ts). */
export interface MatmulProfile {
  /** Least N·K of a 4-bit weight whose matmuls take int8 x (the quantizing prologue must pay for itself). */
  int8MinWeights: number;
  /** Decode rows on f32 x (`matmul_vec.wgsl`). */
  vector: {
    /** Lanes per team (0: chosen from K, so each lane takes about `chunksPerLane` chunks). */
    lanesPerTeam: number;
    /** 4-bit weights: 16-value chunks per lane when the team size is chosen from K. */
    chunksPerLane: number;
    /** Lanes per workgroup at least (a multiple of the team size). */
    workgroupSize: number;
    /** Formats other than 4-bit: adjacent output columns per team. */
    columnsPerTeam: number;
  };
  /** Decode rows of 4-bit weights on int8 x (`matmul_vec_q4x8.wgsl`). */
  vectorInt8: {
    enabled: boolean;
    /** Lanes per workgroup; each workgroup quantizes x once for its columns. */
    workgroupSize: number;
    /** Lanes per workgroup for matrices with N ≥ wideN (they have workgroups enough with smaller ones). */
    wideWorkgroupSize: number;
    wideN: number;
    /** Narrow matrices (N < wideN) with longer rows keep f32 x (few workgroups share the prologue). */
    maxK: number;
  };
  /** Prefill rows (`matmul_tiled.wgsl`; 4-bit weights on int8 x: `matmul_tiled_x8.wgsl`). */
  tiled: {
    /** Matrices with N ≥ wideN take 128-column tiles; narrower int8-x ones split K (`splitK`). */
    wideN: number;
    /** 4-bit weights of ≥ int8MinWeights values on int8 x and integer dot products. */
    int8: boolean;
    /** Int8 x: narrow matrices still take 128-column tiles while that grid has this many workgroups. */
    wideTileMinWorkgroups: number;
    /**
     * Int8 x or matrix units, N < wideN: K summed in this many parts, added in order by `matmul_splitk.wgsl`
     * (1: off).
     */
    splitK: number;
    /** Split K only in engines whose steps hold at most this many rows (the scratch grows with them). */
    splitKMaxRows: number;
    /**
     * 4- and 8-bit weights on matrix units where the device offers f16 16×16×16 ones (Dawn;
     * src/ops/matmul_matrix.ts): x and the weight converted to f16, then an f16 GEMM (bench/NOTES.md #116).
     */
    matrixUnits: boolean;
    /**
     * Matrix units: steps of at most this many rows dequantize the weights to f16 inside the GEMM as it
     * stages each tile (`matmul_sgmat.wgsl` FUSED_DEQUANT); larger ones in a pass of their own into a scratch
     * (`dequant_f16.wgsl`). The same halves either way, so M may choose.
     */
    matrixFusedDequantMaxRows: number;
    /**
     * Matrix units: rows of a prefill step that runs alone, at most (elsewhere 2048): wider steps keep the
     * tensor cores busier, for ~0.3 GB more activations on a 4B model (bench/NOTES.md #129).
     */
    matrixSoloRows: number;
  };
}

/** Split-K decode attention (`attention_decode.wgsl` + `attention_combine.wgsl`). */
export interface DecodeAttentionProfile {
  /** Keys per split (rows past `longRowKeys`: twice as many); sizes the split scratch at load. */
  keysPerSplit: number;
  /** Lanes per workgroup (key rows in flight: lanes / (head dim / 8)). */
  workgroupSize: number;
  /**
   * Two keys per step: rows with at most this many keys prepare q and the new K/V inside the kernel, longer
   * ones take rope.wgsl first (each of their many splits would repeat the preparation; 0: never fused).
   */
  fusedRopeMaxKeys: number;
  /** Lanes per workgroup of the kernel with RoPE fused in (short rows have few workgroups). */
  fusedRopeWorkgroupSize: number;
  /** Lanes per workgroup of `attention_combine.wgsl` (head dim / 4 per group of splits). */
  combineWorkgroupSize: number;
  /** Four keys per step from raw cache words (subgroups; f16 or q8 cache), RoPE fused at every length. */
  fourKeysPerStep: boolean;
  /** With four keys per step: rows with more keys take splits of 2·keysPerSplit (0: never). */
  longRowKeys: number;
}

/** Tiled prefill attention (`attention_prefill.wgsl`, `attention_prefill_quad.wgsl`). */
export interface PrefillAttentionProfile {
  /** Keys per K/V tile at most (fewer where workgroup memory is short): f32 tiles and the f16 cache's. */
  keysPerTile: number;
  /** The same for the q8 cache's tiles under `int8QK`. */
  keysPerTileInt8QK: number;
  /** The same for the four-vector kernel (both caches). */
  keysPerTileQuad: number;
  /** q8 cache, head dims that are multiples of 32: q quantized per 32 values, q·k on integer dot products. */
  int8QK: boolean;
  /** f16 cache, four-vector kernel: q·k on f16 fused multiply-adds (scores carry f16 rounding), else f32. */
  f16QK: boolean;
  /** Head dims 128 and 64 with subgroups: four query vectors per group of hd/16 lanes (the quad kernel). */
  quad: boolean;
  /**
   * Head dim 128 on matrix units where the adapter offers f16 16×16×16 subgroup matrices
   * (`attention_prefill_sgmat.wgsl`, src/ops/attention_matrix.ts); the kernels above elsewhere.
   */
  matrixUnits: boolean;
  /**
   * The q8 cache on matrix units too (its codes dequantized to f16 as tiles are staged); off: its FMA kernel
   * with integer q·k, which was faster (bench/NOTES.md #128).
   */
  matrixUnitsQ8: boolean;
  /**
   * Matrix units: how far (in nats) a row's score may pass the max its weights are taken against before the
   * output is rescaled (a pass through workgroup memory); weights stay ≤ e^margin, within f16.
   */
  matrixRescaleMargin: number;
}

/** MoE expert matmuls of decode rows (`moe_vec.wgsl`, `moe_vec_x8.wgsl`; src/ops/moe.ts). */
export interface MoeProfile {
  /** Lanes per team of the gate|up and down kernels (0: chosen from K, about 4 weight units a lane). */
  gateUpLanes: number;
  downLanes: number;
  /**
   * 4-bit experts on int8 x (`moe_vec_x8.wgsl`: x quantized per 32 values as the dense int8-x kernels do,
   * integer dot products); needs dot4I8Packed and fixed-size subgroups.
   */
  int8X: boolean;
  /** Residual columns per workgroup of the int8-x down kernel with the combine (`moe_vec_x8.wgsl`). */
  downColumns: number;
  /** The top-k on one subgroup alone where it holds the row's experts (lib/topk.wgsl's TOPK_ONE_SUBGROUP). */
  oneSubgroupRoute: boolean;
  /** A 4-bit router's decode rows on int8 x whatever its size (`matmul.int8MinWeights` does not apply). */
  routerInt8X: boolean;
}

/** Gated DeltaNet prefill (src/ops/recurrent.ts). */
export interface DeltaNetProfile {
  /** Prefill segments take the chunked (WY) kernels; else the token-by-token recurrence decode rows use. */
  chunked: boolean;
  /** Lanes per workgroup of the recurrent kernel (gated_delta.wgsl, a value head each; capped by the adapter). */
  recurrentWorkgroupSize: number;
}

export interface KernelProfile {
  /** The adapter the defaults were chosen for. */
  readonly adapter: string;
  readonly matmul: MatmulProfile;
  readonly moe: MoeProfile;
  readonly deltaNet: DeltaNetProfile;
  readonly decodeAttention: DecodeAttentionProfile;
  readonly prefillAttention: PrefillAttentionProfile;
}

type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

/** Fields to change in a profile (the benchmark's `--profile` JSON, the lab, tests). */
export type ProfileOverrides = DeepPartial<Omit<KernelProfile, "adapter">>;

/**
 * The measured values: every one chosen by A/B runs on an NVIDIA H200 (bench/NOTES.md). Other adapters start
 * from them too until they are measured; `defaultProfile` then adjusts what follows from the adapter.
 */
export const TUNED: Omit<KernelProfile, "adapter"> = deepFreeze({
  matmul: {
    int8MinWeights: 1 << 22,
    vector: { lanesPerTeam: 0, chunksPerLane: 8, workgroupSize: 64, columnsPerTeam: 1 },
    vectorInt8: { enabled: true, workgroupSize: 256, wideWorkgroupSize: 128, wideN: 4096, maxK: 8192 },
    tiled: {
      wideN: 4096,
      int8: true,
      wideTileMinWorkgroups: 256,
      splitK: 2,
      splitKMaxRows: 4096,
      matrixUnits: true,
      matrixFusedDequantMaxRows: 512,
      matrixSoloRows: 4096,
    },
  },
  moe: {
    gateUpLanes: 0,
    downLanes: 0,
    int8X: true,
    downColumns: 8,
    oneSubgroupRoute: true,
    routerInt8X: true,
  },
  deltaNet: { chunked: true, recurrentWorkgroupSize: 1024 },
  decodeAttention: {
    keysPerSplit: 256,
    workgroupSize: 128,
    fusedRopeMaxKeys: 4608,
    fusedRopeWorkgroupSize: 128,
    combineWorkgroupSize: 512,
    fourKeysPerStep: true,
    longRowKeys: 8192,
  },
  prefillAttention: {
    keysPerTile: 64,
    keysPerTileInt8QK: 32,
    keysPerTileQuad: 64,
    int8QK: true,
    f16QK: true,
    quad: true,
    matrixUnits: true,
    matrixUnitsQ8: false,
    matrixRescaleMargin: 8,
  },
});

/**
 * The profile for this adapter: the measured values, with the variants its features cannot run switched off
 * (int8 x needs dot4I8Packed and fixed-size subgroups; four keys per step and the quad kernel need subgroups;
 * f16 q·k needs shader-f16) and sizes capped by its limits.
 */
export function defaultProfile(info: GpuInfo): KernelProfile {
  const t = structuredClone(TUNED) as Omit<KernelProfile, "adapter">;
  const sub = info.subgroupMinSize;
  const int8 = info.int8Dot && info.subgroups && sub >= 4 && sub === info.subgroupMaxSize;
  t.matmul.vectorInt8.enabled &&= int8;
  t.matmul.tiled.int8 &&= int8;
  t.moe.int8X &&= int8;
  t.decodeAttention.fourKeysPerStep &&= info.subgroups;
  t.decodeAttention.combineWorkgroupSize = Math.min(
    t.decodeAttention.combineWorkgroupSize,
    info.maxInvocations,
  );
  t.prefillAttention.quad &&= info.subgroups && info.f16;
  t.prefillAttention.f16QK &&= info.f16;
  return { adapter: info.adapter, ...t };
}

/** `base` with `overrides` applied; an unknown field or a value of the wrong type is a ValidationError. */
export function applyProfile(base: KernelProfile, overrides: ProfileOverrides): KernelProfile {
  const out = structuredClone(base) as KernelProfile;
  merge(out as unknown as Record<string, unknown>, overrides as Record<string, unknown>, "");
  return out;
}

function merge(into: Record<string, unknown>, from: Record<string, unknown>, path: string): void {
  for (const [k, v] of Object.entries(from ?? {})) {
    const where = `${path}${k}`;
    const cur = into[k];
    if (cur === undefined || k === "adapter") {
      throw new ValidationError(`unknown kernel profile field "${where}"`, "profile");
    }
    if (typeof cur === "object" && cur !== null) {
      if (typeof v !== "object" || v === null) {
        throw new ValidationError(`kernel profile "${where}" is a group of fields`, "profile");
      }
      merge(cur as Record<string, unknown>, v as Record<string, unknown>, `${where}.`);
    } else if (typeof v !== typeof cur) {
      throw new ValidationError(
        `kernel profile "${where}" must be a ${typeof cur}, not ${JSON.stringify(v)}`,
        "profile",
      );
    } else {
      into[k] = v;
    }
  }
}

function deepFreeze<T extends object>(o: T): T {
  for (const v of Object.values(o)) if (typeof v === "object" && v !== null) deepFreeze(v);
  return Object.freeze(o);
}

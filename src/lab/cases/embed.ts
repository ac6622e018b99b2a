/**
 * Lab case of `embed.wgsl` through `embed()` (src/ops/embed.ts): quantized or 16-bit tables, row shards.
 * @module
 */
import { embed } from "../../ops/embed.ts";
import type { WeightFormat } from "../../ops/linear.ts";
import { type CaseInputs, compareAll, int, type KernelCase, oneOf } from "../case.ts";
import { EXACT, type Tolerance } from "../compare.ts";
import { BufferSet, readF32, seal } from "../harness.ts";
import { embedRef } from "../ref/embed.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import { parseFormat, weightBytes } from "../ref/quant.ts";
import { checkFormat, randomWeights, type ShardData, uploadLinear } from "./weights.ts";

export interface EmbedInputs extends CaseInputs {
  R: number;
  V: number;
  H: number;
  format: WeightFormat;
  shards: ShardData[];
  rows: Row[];
  /** (R, H) f32 before the kernel. */
  x0: Float64Array;
}

/** Quantized tables dequantize in f32 (s·q + b: two roundings); 16-bit tables are copied exactly. */
function tolerance(shape: Record<string, number | string>): Record<string, Tolerance> {
  return { x: String(shape.w).startsWith("q") ? { atol: 1e-6, rtol: 1e-6 } : EXACT };
}

export const embedCase: KernelCase<EmbedInputs> = {
  files: ["embed.wgsl"],
  summary: "x[r, :] = dequant(table[token_r, :]) into the f32 residual; one dispatch per table shard",
  // Qwen3-4B: vocab 151936, hidden 2560 (4-bit: over a 128 MiB binding, so it shards there).
  defaults: { R: 16, V: 151936, H: 2560, w: "q4g64", scale: "bf16", shards: 1, mul: 1 },
  small: { R: 7, V: 1031, H: 320, w: "q4g64", scale: "bf16", shards: 3, mul: 1 },
  keys: {
    R: "step rows (tokens gathered)",
    V: "vocabulary (table rows)",
    H: "hidden size",
    w: "table format: q<bits>g<group>, f16 or bf16",
    scale: "scale/bias dtype of a quantized table",
    shards: "minimum row shards of the table",
    mul: "factor on every embedding (Gemma: √hidden)",
  },
  make(shape, rng, env) {
    const R = int(shape, "R"), V = int(shape, "V"), H = int(shape, "H");
    const format = parseFormat(String(shape.w), oneOf(shape, "scale", ["f16", "bf16"] as const));
    checkFormat(format, H, "embed");
    const shards = randomWeights(rng, format, V, H, {
      amp: 1,
      minShards: int(shape, "shards"),
      maxBinding: env.maxBinding,
    });
    // First, last and shard-edge tokens come first, then random ones.
    const edges = [0, V - 1, ...shards.flatMap((s) => [s.n0, s.n0 + s.n - 1])];
    const rows: Row[] = Array.from({ length: R }, (_, r) => ({
      token: r < edges.length ? edges[r] : rng.int(0, V),
      pos: rng.int(0, 4096),
      slot: rng.int(0, 8),
      kind: rng.int(0, 2),
    }));
    const x0 = Float64Array.from({ length: R * H }, () => Math.fround(rng.signed(1)));
    return { shape, act: env.act, R, V, H, format, shards, rows, x0 };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const rows = set.upload("rows", encodeRows(i.rows));
    const table = uploadLinear(set, "table", i.format, i.V, i.H, i.shards);
    const x = set.upload("x", Float32Array.from(i.x0));
    const ctx = set.context();
    await embed(ctx, { rows, table, x, R: i.R, scale: Number(i.shape.mul ?? 1) });
    return seal(set, ctx, { maxKvLen: 1 }, async () => ({ x: await readF32(gpu, x, i.R * i.H) }));
  },
  check: (got, i) =>
    compareAll(got, {
      x: embedRef({
        tokens: i.rows.map((r) => r.token),
        H: i.H,
        format: i.format,
        shards: i.shards,
        x0: i.x0,
        scale: Number(i.shape.mul ?? 1),
      }),
    }, tolerance(i.shape)),
  tolerance: (shape) => tolerance(shape),
  cost(shape) {
    const R = Number(shape.R), H = Number(shape.H);
    return { bytes: weightBytes(parseFormat(String(shape.w)), R, H) + R * 16 + R * H * 4, flops: 2 * R * H };
  },
};

/**
 * Per kernel family, in isolation on the model's own buffers: matmul_vec (decode, M = 1) and matmul_tiled
 * (a prefill chunk) on every linear shape, decode attention at each depth and prefill attention of one
 * chunk at each depth. Each list cycles through all layers, so weights and KV stream from memory as in a
 * real step instead of sitting in L2; many lists run per pass (timer.ts). Rates are set against the ceilings
 * measured in the same run: bandwidth-bound kernels against the read probe, compute-bound against matmul.
 * @module
 */
import type { Engine } from "../src/engine/engine.ts";
import { ParamArena } from "../src/gpu/kernel.ts";
import type { LinearGroup } from "../src/loader/weights.ts";
import type { DecoderWeights } from "../src/models/llama.ts";
import { attentionDecode, attentionPrefill } from "../src/ops/attention.ts";
import type { OpContext } from "../src/ops/context.ts";
import { bitsPerWeight } from "../src/ops/linear.ts";
import { matmul, usesInt8X } from "../src/ops/matmul.ts";
import type { BenchCeilings } from "./report.ts";
import { GpuTimer, type TimerOptions } from "./timer.ts";

export interface KernelFigure {
  family: "matmul_vec" | "matmul_tiled" | "attention_decode" | "attention_prefill";
  /** Shape in words, e.g. "gate_up 19456×2560" or "depth 4096". */
  what: string;
  /** Microseconds per call (one layer). */
  us: number;
  /** Bytes moved and FLOPs done per call. */
  bytes: number;
  flops: number;
  GBs: number;
  GFLOPs: number;
  bound: "bandwidth" | "compute";
  /** Compute-bound on integer dot products (int8-x prefill matmuls): compared with the int8 matmul probe. */
  int8?: boolean;
  /**
   * GBs ÷ read ceiling (bandwidth-bound) or GFLOPs ÷ matmul ceiling (compute-bound; int8 ones: GOP/s ÷ int8
   * ceiling).
   */
  ofCeiling: number;
}

type ActName = "xn" | "qkv" | "attn" | "gu" | "h" | "x";

/**
 * The linears of a decoder layer with the activation buffers a step reads and writes (also bench/gemm_ab.ts).
 */
export const LINEARS: {
  name: string;
  get: (l: DecoderWeights["layers"][number]) => LinearGroup;
  x: ActName;
  y: ActName;
  out: "act" | "add";
}[] = [
  { name: "qkv", get: (l) => l.qkv, x: "xn", y: "qkv", out: "act" },
  { name: "o_proj", get: (l) => l.o_proj, x: "attn", y: "x", out: "add" },
  { name: "gate_up", get: (l) => l.gate_up, x: "xn", y: "gu", out: "act" },
  { name: "down_proj", get: (l) => l.down_proj, x: "h", y: "x", out: "add" },
];

export async function measureKernels(
  engine: Engine,
  ceil: BenchCeilings,
  o: { depths: number[]; timer?: TimerOptions; log?: (s: string) => void },
): Promise<KernelFigure[]> {
  const w = engine.weights as DecoderWeights;
  if (!Array.isArray(w?.layers)) {
    o.log?.("  kernel families: this architecture's weights are not decoder layers; skipped");
    return [];
  }
  const { gpu, acts, kv, config } = engine;
  const d = config.dims;
  const ab = gpu.info.f16 ? 2 : 4;
  const timer = new GpuTimer(gpu, o.timer);
  const arena = new ParamArena(gpu);
  const out: KernelFigure[] = [];
  const add = (f: Omit<KernelFigure, "GBs" | "GFLOPs" | "ofCeiling" | "us">, ms: number, n: number) => {
    const s = ms / 1000 / n;
    const GBs = f.bytes / s / 1e9;
    const GFLOPs = f.flops / s / 1e9;
    const ofCeiling = f.bound === "bandwidth"
      ? GBs / ceil.readGBs
      : GFLOPs / (f.int8 && ceil.int8GOps ? ceil.int8GOps : ceil.matmulGFLOPs);
    out.push({ ...f, us: s * 1e6, GBs, GFLOPs, ofCeiling });
    o.log?.(
      `  ${f.family} ${f.what}: ${(s * 1e6).toFixed(1)} µs, ${GBs.toFixed(1)} GB/s, ${
        GFLOPs.toFixed(1)
      } GFLOP/s`,
    );
  };
  const time = async (build: (ctx: OpContext) => Promise<void>, maxKvLen = 0) => {
    const ctx: OpContext = { gpu, arena, list: [] };
    await build(ctx);
    arena.flush();
    return (await timer.time(ctx.list, { maxKvLen })).ms;
  };

  // Matmuls on the real weights: decode (M = 1, vector kernel) and one prefill chunk (tiled). Compute-bound
  // lists take a few layers only (still past L2), so one list stays well under a second on big shapes.
  const chunk = Math.min(engine.soloPrefillChunk, acts.cap.rows);
  const few = w.layers.slice(0, Math.min(4, w.layers.length));
  for (const [mode, M] of [["vec", 1], ["tiled", chunk]] as const) {
    const layers = mode === "vec" ? w.layers : few;
    for (const L of LINEARS) {
      const g = L.get(w.layers[0]);
      const wBytes = g.parts.reduce((a, p) => a + (p.w.N * p.w.K * bitsPerWeight(p.w.format)) / 8, 0);
      const ms = await time(async (ctx) => {
        for (const layer of layers) {
          const lg = L.get(layer);
          for (const p of lg.parts) {
            await matmul(ctx, {
              x: acts[L.x],
              w: p.w,
              y: acts[L.y],
              M,
              out: L.out,
              mode,
              ldy: lg.N,
              nOff: p.nOff,
              matrixScratch: acts.matrix,
            });
          }
        }
      });
      const yBytes = L.out === "add" ? 8 : ab; // the residual add reads and writes f32
      add(
        {
          family: mode === "vec" ? "matmul_vec" : "matmul_tiled",
          what: `${L.name} ${g.N}×${g.K}${mode === "tiled" ? ` M=${M}` : ""}`,
          bytes: wBytes + M * (g.K * ab + g.N * yBytes),
          flops: 2 * M * g.N * g.K,
          bound: mode === "vec" ? "bandwidth" : "compute",
          int8: mode === "tiled" && usesInt8X(gpu, g.parts[0].w, "tiled"),
        },
        ms,
        layers.length,
      );
    }
  }
  // The LM head, once per decode step.
  {
    const h = w.lm_head;
    const wBytes = h.parts.reduce((a, p) => a + (p.w.N * p.w.K * bitsPerWeight(p.w.format)) / 8, 0);
    const ms = await time(async (ctx) => {
      for (const p of h.parts) {
        await matmul(ctx, {
          x: acts.xl,
          w: p.w,
          y: acts.logits,
          M: 1,
          out: "f32",
          mode: "vec",
          ldy: h.N,
          nOff: p.nOff,
        });
      }
    });
    add(
      {
        family: "matmul_vec",
        what: `lm_head ${h.N}×${h.K}`,
        bytes: wBytes + h.K * ab + h.N * 4,
        flops: 2 * h.N * h.K,
        bound: "bandwidth",
      },
      ms,
      1,
    );
  }

  // Attention, on a slot of the engine's own KV pool (its contents do not change the work done).
  const slot = engine.slots.acquire();
  if (slot === null) throw new Error("kernel families: no free slot (is a request still running?)");
  const pages: number[] = [];
  const rows = gpu.device.createBuffer({
    size: Math.max(16, chunk * 16),
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
  });
  try {
    const common = {
      rows,
      pages: kv.pageTable,
      nq: d.nq,
      nkv: d.nkv,
      hd: d.hd,
      pageSize: kv.shape.pageSize,
      maxPages: kv.shape.maxPages,
      row0: 0,
      scale: 1 / Math.sqrt(d.hd),
    };
    const ctxMax = engine.contextWindow;
    for (const depth of o.depths.filter((x) => x > 0 && x < ctxMax)) {
      kv.ensure(slot, pages, depth - 1);
      gpu.device.queue.writeBuffer(rows, 0, new Uint32Array([1, depth - 1, slot, 1]));
      const ms = await time(async (ctx) => {
        for (let l = 0; l < d.layers; l++) {
          await attentionDecode(ctx, {
            ...common,
            q: acts.q,
            kv: kv.layers[l],
            out: acts.attn,
            D: 1,
            opart: acts.opart,
            ml: acts.ml,
            maxSplit: acts.maxSplit,
          });
        }
      }, depth);
      const splits = Math.ceil(depth / 256);
      const bytes = depth * 2 * d.nkv * d.hd * ab + 2 * d.nq * d.hd * ab + 2 * d.nq * splits * (d.hd + 2) * 4;
      add(
        {
          family: "attention_decode",
          what: `depth ${depth}`,
          bytes,
          flops: 4 * d.nq * d.hd * depth,
          bound: "bandwidth",
        },
        ms,
        d.layers,
      );
    }
    for (const p0 of [0, ...o.depths.filter((x) => x > 0)]) {
      if (p0 + chunk > ctxMax) continue;
      kv.ensure(slot, pages, p0 + chunk - 1);
      const r = new Uint32Array(4 * chunk);
      for (let i = 0; i < chunk; i++) r.set([1, p0 + i, slot, 0], 4 * i);
      gpu.device.queue.writeBuffer(rows, 0, r);
      const ms = await time(async (ctx) => {
        for (let l = 0; l < few.length; l++) {
          await attentionPrefill(ctx, { ...common, q: acts.q, kv: kv.layers[l], out: acts.attn, S: chunk });
        }
      });
      const pairs = chunk * p0 + (chunk * (chunk + 1)) / 2;
      const bytes = (p0 + chunk) * 2 * d.nkv * d.hd * ab + 2 * chunk * d.nq * d.hd * ab;
      add(
        {
          family: "attention_prefill",
          what: `${chunk} rows at depth ${p0}`,
          bytes,
          flops: 4 * d.nq * d.hd * pairs,
          bound: "compute",
        },
        ms,
        few.length,
      );
    }
  } finally {
    await gpu.device.queue.onSubmittedWorkDone();
    kv.release(pages);
    engine.slots.release(slot);
    rows.destroy();
    timer.destroy();
    arena.destroy();
  }
  return out;
}

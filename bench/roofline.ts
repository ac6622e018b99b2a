/**
 * What one token costs, for the roofline columns: bytes a decode step must read (every linear weight once,
 * plus the KV cache up to the depth) and FLOPs a prefill token needs (2 per weight, plus attention over its
 * context). Ceilings: read bandwidth ÷ bytes per token, matmul rate ÷ FLOPs per token (the int8-x linears' at
 * the int8 matmul probe's rate).
 * Also the bar this benchmark is judged against (the issue's llama.cpp figures and targets, H200).
 * @module
 */
import type { Engine } from "../src/engine/engine.ts";
import type { Linear, WeightFormat } from "../src/ops/linear.ts";
import { bitsPerWeight } from "../src/ops/linear.ts";
import { usesInt8X } from "../src/ops/matmul.ts";

export interface ModelCost {
  /** Weights of all linear layers incl. the LM head, in parameters and bytes (as stored). */
  linearParams: number;
  linearBytes: number;
  /** Of those, the LM head (computed once per prompt, every step in decode). */
  headParams: number;
  headBytes: number;
  /**
   * Parameters of the body's linears that prefill runs on int8 x (matmul_tiled_x8.wgsl: integer dot
   * products).
   */
  x8Params: number;
  /** KV bytes per token of context (all layers, K and V). */
  kvBytesPerToken: number;
  /** Recurrent state a decode step reads and writes (hybrid models). */
  stateBytes: number;
  /** Layers with attention (the others' cost does not grow with context). */
  layers: number;
  nq: number;
  hd: number;
}

/**
 * Walks the engine's weights (any object graph of Linears) and its dims. An expert stack counts the experts a
 * token uses (top-k), which is what a decode step reads and a prefill row multiplies.
 */
export function modelCost(engine: Engine): ModelCost {
  const d = engine.config.dims;
  const topK = engine.config.hybrid?.moe?.topK ?? 0;
  const seen = new Set<Linear>();
  let params = 0;
  let bytes = 0;
  let x8 = 0;
  const visit = (o: unknown) => {
    if (!o || typeof o !== "object" || o instanceof GPUBuffer) return;
    if (isLinear(o)) {
      if (seen.has(o)) return; // a tied head is the embedding: counted once here, added back below
      seen.add(o);
      const n = ("E" in o ? topK : 1) * o.N * o.K;
      params += n;
      bytes += (n * bitsPerWeight(o.format)) / 8;
      if (usesInt8X(engine.gpu, o, "tiled")) x8 += o.N * o.K;
      return;
    }
    for (const v of Array.isArray(o) ? o : Object.values(o)) visit(v);
  };
  const w = engine.weights as { embed_tokens?: Linear; lm_head?: { parts: { w: Linear }[] } };
  // The embedding is gathered (one row per token), not streamed: leave it out unless it is the head.
  const embed = w.embed_tokens;
  if (embed) seen.add(embed);
  visit(engine.weights);
  let headParams = 0;
  let headBytes = 0;
  for (const p of w.lm_head?.parts ?? []) {
    const n = p.w.N * p.w.K;
    const b = (n * bitsPerWeight(p.w.format)) / 8;
    headParams += n;
    headBytes += b;
    if (p.w !== embed && usesInt8X(engine.gpu, p.w, "tiled")) x8 -= n; // the head is not the body
    if (p.w === embed) {
      params += n;
      bytes += b;
    }
  }
  return {
    linearParams: params,
    linearBytes: bytes,
    headParams,
    headBytes,
    x8Params: x8,
    kvBytesPerToken: engine.kv.bytesPerPage / engine.kv.shape.pageSize,
    stateBytes: 2 * (engine.recurrent?.bytesPerSlot ?? 0),
    layers: engine.kv.shape.layers,
    nq: d.nq,
    hd: d.hd,
  };
}

function isLinear(o: object): o is Linear {
  const l = o as Linear;
  return typeof l.N === "number" && typeof l.K === "number" && Array.isArray(l.shards) &&
    !!(l.format as WeightFormat)?.kind;
}

/** Bytes a decode step reads at context `depth`. */
export function decodeBytes(c: ModelCost, depth: number): number {
  return c.linearBytes + c.stateBytes + c.kvBytesPerToken * depth;
}

/**
 * Average FLOPs per token of a prefill of `n` tokens starting at position `p0` (one LM-head row per prompt).
 */
export function prefillFlops(c: ModelCost, n: number, p0 = 0): number {
  const body = 2 * (c.linearParams - c.headParams);
  const head = (2 * c.headParams) / n;
  const attn = 4 * c.nq * c.hd * c.layers * (p0 + (n + 1) / 2);
  return body + head + attn;
}

/**
 * The prefill roofline, tokens/s: the int8-x linears' FLOPs at the int8 matmul rate (`int8` GOP/s, when the
 * probe ran), everything else (attention, f32-x linears, the head) at the f32/f16 matmul rate.
 */
export function prefillCeilingTps(
  c: ModelCost,
  n: number,
  p0: number,
  rates: { matmul: number; int8: number | null },
): number {
  const all = prefillFlops(c, n, p0);
  const x8 = rates.int8 ? 2 * c.x8Params : 0;
  return 1 / (x8 / (rates.int8 ?? 1) + (all - x8) / rates.matmul);
}

export interface Bar {
  /** Where the figures come from. */
  source: string;
  decode: Record<number, number>;
  prefill: Record<number, number>;
  prefillAtDepth: Record<number, number>;
}

/** The bar (H200, batch 1): llama.cpp Vulkan measurements and our targets, by model name. */
export const BARS: Record<string, { llamacpp: Bar; target: Bar }> = {
  "qwen3-4b": {
    llamacpp: {
      source: "llama.cpp Vulkan, H200",
      decode: { 0: 315, 16384: 213 },
      prefill: { 512: 14400 },
      prefillAtDepth: { 16384: 7400 },
    },
    target: {
      source: "target",
      decode: { 0: 400, 16384: 280 },
      prefill: { 512: 5000 },
      prefillAtDepth: { 16384: 3000 },
    },
  },
  "flint-coder-19m-mlx-4bit": {
    llamacpp: { source: "llama.cpp Vulkan, H200", decode: { 0: 1280 }, prefill: {}, prefillAtDepth: {} },
    target: { source: "target", decode: { 0: 1500 }, prefill: {}, prefillAtDepth: {} },
  },
};

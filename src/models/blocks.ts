/**
 * Pieces the hybrid and MoE architecture files share: reading `layer_types` and the MoE fields, loading an
 * attention block (optionally with Qwen3-Next's output gate) and an MLP (dense SwiGLU or sparse MoE with an
 * optional shared expert), and their forward passes over the StepGraph ops.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { ConfigReader } from "../loader/config.ts";
import type { LinearGroup, WeightRef, WeightSource } from "../loader/weights.ts";
import { gateOutput, moe, type MoeWeights } from "../engine/step_hybrid.ts";
import type { StepGraph } from "../engine/step.ts";
import type { HybridDims, LayerSpec } from "./model.ts";
import type { DecoderConfig } from "./llama.ts";

/** `layer_types` mapped through `kinds` (HF name → mixer); absent: `fallback(i)`. */
export function readLayerTypes(
  c: ConfigReader,
  layers: number,
  kinds: Record<string, LayerSpec["mixer"]>,
  fallback: (i: number) => LayerSpec["mixer"],
): LayerSpec["mixer"][] {
  const v = c.json.layer_types;
  if (v === undefined || v === null) return Array.from({ length: layers }, (_, i) => fallback(i));
  if (!Array.isArray(v) || v.length !== layers) {
    throw new LoaderError(c.file, "layer_types", `expected an array of ${layers} layer types`);
  }
  return v.map((t) => {
    const k = kinds[t];
    if (!k) {
      throw new LoaderError(
        c.file,
        "layer_types",
        `layer type ${JSON.stringify(t)} is not supported (supported: ${Object.keys(kinds).join(", ")})`,
      );
    }
    return k;
  });
}

/**
 * The MoE fields (Qwen3-MoE / Qwen3-Next / Qwen3.5-MoE), or null for a dense model. `renormalize` is the
 * default of norm_topk_prob where a config has none (Qwen3.5-MoE's router always renormalises).
 */
export function readMoe(
  c: ConfigReader,
  renormalize = false,
): { moe: NonNullable<HybridDims["moe"]>; isMoe: (i: number) => boolean } | null {
  const experts = c.has("num_experts") ? c.int("num_experts") : c.int("num_local_experts", 0);
  if (experts === 0) return null;
  const topK = c.int("num_experts_per_tok");
  if (topK < 1 || topK > Math.min(16, experts)) {
    throw new LoaderError(c.file, "num_experts_per_tok", `${topK}: between 1 and min(16, ${experts})`);
  }
  const step = c.int("decoder_sparse_step", 1);
  const dense = new Set<number>(Array.isArray(c.json.mlp_only_layers) ? c.json.mlp_only_layers : []);
  return {
    moe: {
      experts,
      topK,
      intermediate: c.int("moe_intermediate_size"),
      shared: c.int("shared_expert_intermediate_size", 0),
      renormalize: c.bool("norm_topk_prob", renormalize),
    },
    isMoe: (i) => !dense.has(i) && step > 0 && (i + 1) % step === 0,
  };
}

export interface AttentionWeights {
  input_layernorm: GPUBuffer;
  qkv: LinearGroup;
  q_norm?: GPUBuffer;
  k_norm?: GPUBuffer;
  /** Qwen3-Next: the output gate's rows of q_proj (sigmoid(x · W_gate) scales the attention output). */
  gate?: LinearGroup;
  o_proj: LinearGroup;
}

/** Loading options of an attention block: `(1 + w)` norms, a gated q_proj, HF module names. */
export interface AttentionNames {
  plusOne: boolean;
  gated: boolean;
  /** Norm module names (`q_norm`/`k_norm`; LFM2: `q_layernorm`/`k_layernorm`). */
  qNorm?: string;
  kNorm?: string;
  /** The output projection (`o_proj`; LFM2: `out_proj`) and the layer's input norm. */
  out?: string;
  inputNorm?: string;
}

/** Rows [h·2·hd + off, +hd) of every head: one half of a gated q_proj ([q_h | gate_h] per head). */
function headHalves(nq: number, hd: number, off: number): [number, number][] {
  return Array.from({ length: nq }, (_, h) => [h * 2 * hd + off, hd] as [number, number]);
}

export async function loadAttention(
  l: WeightSource,
  p: string,
  c: DecoderConfig,
  o: AttentionNames,
): Promise<AttentionWeights> {
  const d = c.dims;
  const a = `${p}.self_attn`;
  const plusOne = { plusOne: o.plusOne };
  const q: WeightRef = o.gated ? { path: `${a}.q_proj`, rows: headHalves(d.nq, d.hd, 0) } : `${a}.q_proj`;
  return {
    input_layernorm: await l.vector(`${p}.${o.inputNorm ?? "input_layernorm"}.weight`, d.hidden, plusOne),
    qkv: await l.group(
      [q, `${a}.k_proj`, `${a}.v_proj`],
      [d.nq * d.hd, d.nkv * d.hd, d.nkv * d.hd],
      d.hidden,
    ),
    q_norm: c.qkNorm ? await l.vector(`${a}.${o.qNorm ?? "q_norm"}.weight`, d.hd, plusOne) : undefined,
    k_norm: c.qkNorm ? await l.vector(`${a}.${o.kNorm ?? "k_norm"}.weight`, d.hd, plusOne) : undefined,
    gate: o.gated
      ? await l.group([{ path: `${a}.q_proj`, rows: headHalves(d.nq, d.hd, d.hd) }], [d.nq * d.hd], d.hidden)
      : undefined,
    o_proj: await l.group([`${a}.${o.out ?? "o_proj"}`], [d.hidden], d.nq * d.hd),
  };
}

/** x += o_proj(attention(x)) (× sigmoid gate when the block has one). */
export async function forwardAttention(
  g: StepGraph,
  layer: number,
  w: AttentionWeights,
  window?: number,
): Promise<void> {
  await g.normLinear(w.input_layernorm, w.qkv, "qkv");
  if (w.gate) await g.normLinear(w.input_layernorm, w.gate, "gate");
  await g.attention(layer, { qNorm: w.q_norm, kNorm: w.k_norm, ...(window ? { window } : {}) });
  if (w.gate) await gateOutput(g);
  await g.linear("attn", w.o_proj, "x");
}

export type MlpWeights =
  | { kind: "dense"; norm: GPUBuffer; gate_up: LinearGroup; down: LinearGroup }
  | { kind: "moe"; norm: GPUBuffer; moe: MoeWeights };

/** A SwiGLU MLP's gate|up and down, under `names` (HF `gate_proj`/`up_proj`/`down_proj`). */
export async function loadSwiGLU(
  l: WeightSource,
  p: string,
  width: number,
  hidden: number,
  names = ["gate_proj", "up_proj", "down_proj"],
): Promise<{ gate_up: LinearGroup; down: LinearGroup }> {
  return {
    gate_up: await l.group([`${p}.${names[0]}`, `${p}.${names[1]}`], [width, width], hidden),
    down: await l.group([`${p}.${names[2]}`], [hidden], width),
  };
}

/** The post-attention norm and the MLP of layer `p`: dense, or MoE (with a shared expert if declared). */
export async function loadMlp(
  l: WeightSource,
  p: string,
  c: DecoderConfig & { hybrid?: HybridDims },
  kind: LayerSpec["mlp"],
  plusOne: boolean,
): Promise<MlpWeights> {
  const H = c.dims.hidden;
  const norm = await l.vector(`${p}.post_attention_layernorm.weight`, H, { plusOne });
  const m = c.hybrid?.moe;
  if (kind === "dense" || !m) {
    return { kind: "dense", norm, ...await loadSwiGLU(l, `${p}.mlp`, c.dims.intermediate, H) };
  }
  const at = { prefix: `${p}.mlp` };
  const w: MoeWeights = {
    gate: await l.group([`${p}.mlp.gate`], [m.experts], H),
    gate_up: await l.experts(
      { ...at, names: ["gate_proj", "up_proj"], fused: "experts.gate_up_proj" },
      m.experts,
      [m.intermediate, m.intermediate],
      H,
    ),
    down: await l.experts(
      { ...at, names: ["down_proj"], fused: "experts.down_proj" },
      m.experts,
      [H],
      m.intermediate,
    ),
  };
  if (m.shared) {
    w.shared = {
      ...await loadSwiGLU(l, `${p}.mlp.shared_expert`, m.shared, H),
      gate: await l.group([`${p}.mlp.shared_expert_gate`], [1], H),
    };
  }
  return { kind: "moe", norm, moe: w };
}

export async function forwardMlp(g: StepGraph, w: MlpWeights): Promise<void> {
  if (w.kind === "moe") return await moe(g, w.norm, w.moe);
  await g.normSwiGLU(w.norm, w.gate_up);
  await g.linear("h", w.down, "x");
}

/**
 * What an architecture file provides. Each file is named after the HF `model_type`, reads its config from
 * `config.json`, loads weights by their HF names, and writes `forward` over the StepGraph op vocabulary
 * (embed, norm, normLinear, linear, attention, normSwiGLU, moe, causalConv, gatedDelta, logits) — it never touches GPUDevice or byte offsets.
 * @module
 */
import type { ConfigReader, QuantConfig, RopeConfig } from "../loader/config.ts";
import type { WeightSource } from "../loader/weights.ts";
import type { Dims } from "../engine/resources.ts";
import type { StepGraph } from "../engine/step.ts";

/**
 * What one layer is: its token mixer, its channel mixer, and so what it keeps per sequence. Attention layers
 * keep KV pages (sliding ones read only the last `window` keys); gated DeltaNet and short-conv layers keep a
 * fixed-size recurrent state per sequence slot (src/engine/recurrent.ts) and no KV pages.
 */
export interface LayerSpec {
  mixer: "attention" | "sliding_attention" | "gated_deltanet" | "short_conv";
  mlp: "dense" | "moe";
}

/** Shapes of the non-dense parts a hybrid or MoE model declares (activation buffers and state follow). */
export interface HybridDims {
  /** Gated DeltaNet layers: key/value heads and head dims, conv kernel width. */
  deltanet?: { nk: number; nv: number; dk: number; dv: number; convKernel: number };
  /** Short-conv layers (LFM2): conv kernel width over `hidden` channels. */
  shortConv?: { convKernel: number };
  /** Sparse MoE MLPs: experts, experts per token, expert MLP width, shared expert width (0: none). */
  moe?: { experts: number; topK: number; intermediate: number; shared: number; renormalize: boolean };
  /** Attention output gated by sigmoid(x · W_gate) per element (Qwen3-Next full-attention layers). */
  gatedAttention?: boolean;
  /** Sliding-window attention layers' window (tokens). */
  window?: number;
}

export interface ArchConfig {
  modelType: string;
  dims: Dims;
  rope: RopeConfig;
  maxPosition: number;
  quant: QuantConfig | null;
  /** Per-layer declaration; absent: every layer is full attention + dense MLP. */
  layers?: LayerSpec[];
  hybrid?: HybridDims;
}

/** The declaration of layer `i` (dense attention + MLP unless the config says otherwise). */
export function layerSpec(c: ArchConfig, i: number): LayerSpec {
  return c.layers?.[i] ?? { mixer: "attention", mlp: "dense" };
}

/** Whether layer spec `s` keeps KV pages. */
export function keepsKv(s: LayerSpec): boolean {
  return s.mixer === "attention" || s.mixer === "sliding_attention";
}

export interface Architecture<C extends ArchConfig = ArchConfig, W = unknown> {
  modelType: string;
  parseConfig(c: ConfigReader): C;
  loadWeights(l: WeightSource, c: C): Promise<W>;
  forward(g: StepGraph, w: W, c: C): Promise<void>;
}

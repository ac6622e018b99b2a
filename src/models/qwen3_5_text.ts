/**
 * Qwen3.5 / 3.6 text model (HF `Qwen3_5ForCausalLM`, model_type `qwen3_5_text`): the Qwen3-Next hybrid
 * (gated DeltaNet layers + gated full attention, `(1 + w)` norms, partial RoPE) with separate DeltaNet input
 * projections (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: already q|k|v|z|b|a) and a dense MLP.
 * @module
 */
import type { Architecture } from "./model.ts";
import {
  forwardHybrid,
  type HybridConfig,
  type HybridWeights,
  loadHybrid,
  parseHybridConfig,
  type Projections,
} from "./qwen3_next.ts";

/** The DeltaNet input projections of a Qwen3.5 layer, already in the engine's [q|k|v | z | b | a] order. */
export const qwen35Projections: Projections = (a, d) => [
  [`${a}.in_proj_qkv`, 2 * d.nk * d.dk + d.nv * d.dv],
  [`${a}.in_proj_z`, d.nv * d.dv],
  [`${a}.in_proj_b`, d.nv],
  [`${a}.in_proj_a`, d.nv],
];

export const qwen3_5_text: Architecture<HybridConfig, HybridWeights> = {
  modelType: "qwen3_5_text",
  parseConfig: parseHybridConfig,
  loadWeights: (l, c) => loadHybrid(l, c, qwen35Projections),
  forward: (g, w) => forwardHybrid(g, w),
};

/**
 * Qwen3.5 / 3.6 MoE text model (HF `Qwen3_5MoeForCausalLM`, model_type `qwen3_5_moe_text`): the Qwen3.5
 * hybrid whose MLPs are sparse MoE with a shared expert (as Qwen3-Next's); its router always renormalises the
 * top-k weights (the config has no norm_topk_prob).
 * @module
 */
import type { Architecture } from "./model.ts";
import {
  forwardHybrid,
  type HybridConfig,
  type HybridWeights,
  loadHybrid,
  parseHybridConfig,
} from "./qwen3_next.ts";
import { qwen35Projections } from "./qwen3_5_text.ts";

export const qwen3_5_moe_text: Architecture<HybridConfig, HybridWeights> = {
  modelType: "qwen3_5_moe_text",
  parseConfig: (c) => parseHybridConfig(c, true),
  loadWeights: (l, c) => loadHybrid(l, c, qwen35Projections),
  forward: (g, w) => forwardHybrid(g, w),
};

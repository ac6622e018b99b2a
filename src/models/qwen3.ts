/**
 * Qwen3 (HF `Qwen3ForCausalLM`; mlx-lm `models/qwen3.py`): the Llama block with an explicit head_dim and
 * per-head RMSNorm of q and k (`q_norm`, `k_norm`, weight [head_dim]) applied after the reshape, before RoPE.
 * @module
 */
import {
  type DecoderConfig,
  type DecoderWeights,
  forwardDecoder,
  loadDecoder,
  parseDecoderConfig,
} from "./llama.ts";
import type { Architecture } from "./model.ts";

export const qwen3: Architecture<DecoderConfig, DecoderWeights> = {
  modelType: "qwen3",
  parseConfig: (c) => parseDecoderConfig(c, { defaultTheta: 1e6, qkNorm: true, headDimKey: true }),
  loadWeights: loadDecoder,
  forward: (g, w) => forwardDecoder(g, w),
};

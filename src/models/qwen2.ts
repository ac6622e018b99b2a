/**
 * Qwen2 (HF `Qwen2ForCausalLM`; mlx-lm `models/qwen2.py`): the Llama block with biases on q/k/v (picked up
 * from the `*.bias` tensors), head_dim = hidden/heads, rope_theta 1e6 by default.
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

export const qwen2: Architecture<DecoderConfig, DecoderWeights> = {
  modelType: "qwen2",
  parseConfig: (c) => parseDecoderConfig(c, { defaultTheta: 1e6, qkNorm: false, headDimKey: false }),
  loadWeights: loadDecoder,
  forward: (g, w) => forwardDecoder(g, w),
};

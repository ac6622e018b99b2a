/**
 * Qwen3-MoE (HF `Qwen3MoeForCausalLM`; mlx-lm `models/qwen3_moe.py`): the Qwen3 block whose MLP is a sparse
 * mixture of experts on every `decoder_sparse_step`-th layer outside `mlp_only_layers`:
 *   p = softmax(router(n)); top-k experts; weights renormalised iff norm_topk_prob
 *   out = h + Σ_j p_j · down_j(silu(gate_j(n)) · up_j(n))     n = post_attention_layernorm(h)
 * Experts load from HF per-expert names, HF fused stacks or MLX `switch_mlp` stacks (loader/weights.ts).
 * @module
 */
import { type DecoderConfig, parseDecoderConfig } from "./llama.ts";
import {
  type AttentionWeights,
  forwardAttention,
  forwardMlp,
  loadAttention,
  loadMlp,
  type MlpWeights,
  readMoe,
} from "./blocks.ts";
import type { Architecture, HybridDims, LayerSpec } from "./model.ts";

export interface MoeConfig extends DecoderConfig {
  layers: LayerSpec[];
  hybrid: HybridDims;
}

export interface MoeModelWeights {
  embed_tokens: import("../ops/linear.ts").Linear;
  layers: { attn: AttentionWeights; mlp: MlpWeights }[];
  norm: GPUBuffer;
  lm_head: import("../loader/weights.ts").LinearGroup;
}

export const qwen3_moe: Architecture<MoeConfig, MoeModelWeights> = {
  modelType: "qwen3_moe",
  parseConfig(c) {
    const base = parseDecoderConfig(c, { defaultTheta: 1e6, qkNorm: true, headDimKey: true });
    const m = readMoe(c);
    const layers = Array.from({ length: base.dims.layers }, (_, i): LayerSpec => ({
      mixer: "attention",
      mlp: m?.isMoe(i) ? "moe" : "dense",
    }));
    return { ...base, layers, hybrid: m ? { moe: m.moe } : {} };
  },
  async loadWeights(l, c) {
    const d = c.dims;
    const embed_tokens = await l.linear("model.embed_tokens", d.vocab, d.hidden);
    const layers = [];
    for (let i = 0; i < d.layers; i++) {
      const p = `model.layers.${i}`;
      layers.push({
        attn: await loadAttention(l, p, c, { plusOne: false, gated: false }),
        mlp: await loadMlp(l, p, c, c.layers[i].mlp, false),
      });
    }
    return {
      embed_tokens,
      layers,
      norm: await l.vector("model.norm.weight", d.hidden),
      lm_head: l.has("lm_head.weight")
        ? await l.group(["lm_head"], [d.vocab], d.hidden)
        : { N: d.vocab, K: d.hidden, parts: [{ w: embed_tokens, nOff: 0 }] },
    };
  },
  async forward(g, w) {
    await g.begin();
    await g.embed(w.embed_tokens);
    for (const [i, l] of w.layers.entries()) {
      await forwardAttention(g, i, l.attn);
      await forwardMlp(g, l.mlp);
    }
    await g.logits(w.norm, w.lm_head);
  },
};

/**
 * The benchmark's synthetic model shapes and the HF config.json each stands for (src/loader/synthetic.ts makes
 * their random weights): dense Qwen3 sizes, a Qwen3-MoE and a Qwen3-Next (hybrid gated DeltaNet + MoE) shape.
 * @module
 */
import { LoaderError } from "../errors.ts";

export interface SyntheticShape {
  /** Sparse MoE MLPs: experts, experts per token, expert width, shared expert width (0: none). */
  moe?: { experts: number; topK: number; intermediate: number; shared: number };
  /** Qwen3-Next hybrid: gated DeltaNet heads and dims; every `interval`-th layer is full attention. */
  deltanet?: { nk: number; nv: number; dk: number; dv: number; interval: number };
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  vocab: number;
  tied: boolean;
}

/** Qwen3 shapes (vocab 16384, the reference shape's, so the bundled tokenizer fits every one). */
export const SYNTHETIC_SHAPES: Record<string, SyntheticShape> = {
  tiny: {
    hidden: 128,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 32,
    intermediate: 256,
    vocab: 16384,
    tied: true,
  },
  "qwen3-0.6b": {
    hidden: 1024,
    layers: 28,
    heads: 16,
    kvHeads: 8,
    headDim: 128,
    intermediate: 3072,
    vocab: 16384,
    tied: true,
  },
  "qwen3-4b": {
    hidden: 2560,
    layers: 36,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    intermediate: 9728,
    vocab: 16384,
    tied: true,
  },
  // The real Qwen3-8B has an untied head; so does this one.
  "qwen3-8b": {
    hidden: 4096,
    layers: 36,
    heads: 32,
    kvHeads: 8,
    headDim: 128,
    intermediate: 12288,
    vocab: 16384,
    tied: false,
  },
  // The two below at toy sizes, for software adapters (--quick) and tests.
  "tiny-moe": {
    hidden: 128,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 32,
    intermediate: 256,
    vocab: 16384,
    tied: false,
    moe: { experts: 8, topK: 2, intermediate: 64, shared: 0 },
  },
  "tiny-next": {
    hidden: 128,
    layers: 4,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    intermediate: 256,
    vocab: 16384,
    tied: false,
    moe: { experts: 8, topK: 2, intermediate: 64, shared: 64 },
    deltanet: { nk: 2, nv: 4, dk: 32, dv: 32, interval: 4 },
  },
  // Qwen3-30B-A3B: 128 experts, 8 per token.
  "qwen3-30b-a3b": {
    hidden: 2048,
    layers: 48,
    heads: 32,
    kvHeads: 4,
    headDim: 128,
    intermediate: 6144,
    vocab: 16384,
    tied: false,
    moe: { experts: 128, topK: 8, intermediate: 768, shared: 0 },
  },
  // Qwen3-Next-80B-A3B: 3 of 4 layers gated DeltaNet; 512 experts, 10 per token, and a shared expert.
  "qwen3-next-80b-a3b": {
    hidden: 2048,
    layers: 48,
    heads: 16,
    kvHeads: 2,
    headDim: 256,
    intermediate: 5120,
    vocab: 16384,
    tied: false,
    moe: { experts: 512, topK: 10, intermediate: 512, shared: 512 },
    deltanet: { nk: 16, nv: 32, dk: 128, dv: 128, interval: 4 },
  },
};

export function syntheticShape(name: string): SyntheticShape {
  const s = SYNTHETIC_SHAPES[name];
  if (!s) {
    throw new LoaderError(
      `synthetic/${name}`,
      null,
      `unknown synthetic shape; known: ${Object.keys(SYNTHETIC_SHAPES).join(", ")}`,
    );
  }
  return s;
}

/** The HF config.json of a synthetic shape (MLX 4-bit g64 unless `quant` says otherwise). */
export function syntheticConfig(name: string, quant = { bits: 4, groupSize: 64 }): Record<string, unknown> {
  const s = syntheticShape(name);
  const q = { group_size: quant.groupSize, bits: quant.bits, mode: "affine" };
  const moe = s.moe
    ? {
      num_experts: s.moe.experts,
      num_experts_per_tok: s.moe.topK,
      moe_intermediate_size: s.moe.intermediate,
      shared_expert_intermediate_size: s.moe.shared,
      norm_topk_prob: true,
      decoder_sparse_step: 1,
      mlp_only_layers: [],
    }
    : {};
  const dn = s.deltanet;
  const hybrid = dn
    ? {
      linear_num_key_heads: dn.nk,
      linear_num_value_heads: dn.nv,
      linear_key_head_dim: dn.dk,
      linear_value_head_dim: dn.dv,
      linear_conv_kernel_dim: 4,
      full_attention_interval: dn.interval,
      partial_rotary_factor: 0.25,
    }
    : {};
  return {
    architectures: [dn ? "Qwen3NextForCausalLM" : s.moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"],
    model_type: dn ? "qwen3_next" : s.moe ? "qwen3_moe" : "qwen3",
    ...moe,
    ...hybrid,
    hidden_size: s.hidden,
    num_hidden_layers: s.layers,
    num_attention_heads: s.heads,
    num_key_value_heads: s.kvHeads,
    head_dim: s.headDim,
    intermediate_size: s.intermediate,
    vocab_size: s.vocab,
    max_position_embeddings: 40960,
    rms_norm_eps: 1e-6,
    // Both spellings: older transformers read rope_theta, newer rope_parameters.
    rope_theta: 1e6,
    rope_parameters: { rope_theta: 1e6, rope_type: "default" },
    hidden_act: "silu",
    attention_bias: false,
    tie_word_embeddings: s.tied,
    torch_dtype: "bfloat16",
    // No eos_token_id: random weights may pick any id, and a benchmark must run its full token count.
    bos_token_id: null,
    eos_token_id: null,
    quantization: q,
    quantization_config: q,
  };
}

/**
 * Llama (HF `LlamaForCausalLM`; mlx-lm `models/llama.py`): pre-norm decoder blocks with GQA attention,
 * rotate-half RoPE and a SwiGLU MLP. qwen2 and qwen3 are this block with switches (q/k/v biases, per-head
 * q/k RMSNorm), so they reuse `loadDecoder` and `forwardDecoder`.
 *   h = x + o_proj(attn(rope(q), rope(k), v))    q,k,v = proj(input_layernorm(x))
 *   out = h + down_proj(silu(gate_proj(n)) · up_proj(n))   n = post_attention_layernorm(h)
 * @module
 */
import { LoaderError } from "../errors.ts";
import { type ConfigReader, readQuant, readRope } from "../loader/config.ts";
import type { LinearGroup, WeightSource } from "../loader/weights.ts";
import type { Linear } from "../ops/linear.ts";
import type { StepGraph } from "../engine/step.ts";
import type { ArchConfig, Architecture } from "./model.ts";

export interface DecoderConfig extends ArchConfig {
  /** Per-head RMSNorm on q and k before RoPE (Qwen3). */
  qkNorm: boolean;
}

export interface DecoderLayer {
  input_layernorm: GPUBuffer;
  qkv: LinearGroup; // self_attn.{q,k,v}_proj, fused
  q_norm?: GPUBuffer;
  k_norm?: GPUBuffer;
  o_proj: LinearGroup;
  post_attention_layernorm: GPUBuffer;
  gate_up: LinearGroup; // mlp.{gate,up}_proj, fused
  down_proj: LinearGroup;
}

export interface DecoderWeights {
  embed_tokens: Linear;
  layers: DecoderLayer[];
  norm: GPUBuffer;
  lm_head: LinearGroup;
}

/** The config fields shared by llama, qwen2 and qwen3. */
export function parseDecoderConfig(
  c: ConfigReader,
  o: { defaultTheta: number; qkNorm: boolean; headDimKey: boolean },
): DecoderConfig {
  const hidden = c.int("hidden_size");
  const nq = c.int("num_attention_heads");
  const nkv = c.int("num_key_value_heads", nq);
  if (nq % nkv !== 0) {
    throw new LoaderError(c.file, "num_key_value_heads", `${nkv} does not divide num_attention_heads ${nq}`);
  }
  const hd = o.headDimKey && c.has("head_dim") ? c.int("head_dim") : hidden / nq;
  if (!Number.isInteger(hd)) {
    throw new LoaderError(c.file, "head_dim", `hidden_size ${hidden} / heads ${nq} is not an integer`);
  }
  const rope = readRope(c, hd, o.defaultTheta);
  return {
    modelType: String(c.json.model_type),
    dims: {
      hidden,
      layers: c.int("num_hidden_layers"),
      nq,
      nkv,
      hd,
      rotary: rope.dims,
      intermediate: c.int("intermediate_size"),
      vocab: c.int("vocab_size"),
      eps: c.num("rms_norm_eps", 1e-6),
    },
    rope,
    maxPosition: c.int("max_position_embeddings", 4096),
    quant: readQuant(c),
    qkNorm: o.qkNorm,
  };
}

export async function loadDecoder(l: WeightSource, c: DecoderConfig): Promise<DecoderWeights> {
  const d = c.dims;
  const H = d.hidden;
  const embed_tokens = await l.linear("model.embed_tokens", d.vocab, H);
  const layers: DecoderLayer[] = [];
  for (let i = 0; i < d.layers; i++) {
    const p = `model.layers.${i}`;
    const a = `${p}.self_attn`;
    layers.push({
      input_layernorm: await l.vector(`${p}.input_layernorm.weight`, H),
      qkv: await l.group([`${a}.q_proj`, `${a}.k_proj`, `${a}.v_proj`], [
        d.nq * d.hd,
        d.nkv * d.hd,
        d.nkv * d.hd,
      ], H),
      q_norm: c.qkNorm ? await l.vector(`${a}.q_norm.weight`, d.hd) : undefined,
      k_norm: c.qkNorm ? await l.vector(`${a}.k_norm.weight`, d.hd) : undefined,
      o_proj: await l.group([`${a}.o_proj`], [H], d.nq * d.hd),
      post_attention_layernorm: await l.vector(`${p}.post_attention_layernorm.weight`, H),
      gate_up: await l.group([`${p}.mlp.gate_proj`, `${p}.mlp.up_proj`], [d.intermediate, d.intermediate], H),
      down_proj: await l.group([`${p}.mlp.down_proj`], [H], d.intermediate),
    });
  }
  const norm = await l.vector("model.norm.weight", H);
  // Any lm_head tensor means untied (mlx-lm and HF disagree on the tie default).
  const lm_head = l.has("lm_head.weight")
    ? await l.group(["lm_head"], [d.vocab], H)
    : { N: d.vocab, K: H, parts: [{ w: embed_tokens, nOff: 0 }] };
  return { embed_tokens, layers, norm, lm_head };
}

export async function forwardDecoder(g: StepGraph, w: DecoderWeights): Promise<void> {
  await g.begin();
  await g.embed(w.embed_tokens);
  for (const [i, l] of w.layers.entries()) {
    await g.normLinear(l.input_layernorm, l.qkv, "qkv");
    await g.attention(i, { qNorm: l.q_norm, kNorm: l.k_norm });
    await g.linear("attn", l.o_proj, "x");
    await g.normSwiGLU(l.post_attention_layernorm, l.gate_up);
    await g.linear("h", l.down_proj, "x");
  }
  await g.logits(w.norm, w.lm_head);
}

export const llama: Architecture<DecoderConfig, DecoderWeights> = {
  modelType: "llama",
  parseConfig: (c) => parseDecoderConfig(c, { defaultTheta: 10000, qkNorm: false, headDimKey: true }),
  loadWeights: loadDecoder,
  forward: (g, w) => forwardDecoder(g, w),
};

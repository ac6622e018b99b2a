/**
 * Gemma 3 text (HF `Gemma3ForCausalLM`, model_type `gemma3_text`; mlx-lm `models/gemma3_text.py`): sliding-
 * window attention layers (their own RoPE base) with a full-attention layer every `sliding_window_pattern`;
 * `(1 + w)` RMSNorms, including norms of each sublayer's output before its residual add; per-head q/k
 * norms; scores scaled by query_pre_attn_scalar^−½; a GeGLU MLP (tanh gelu); embeddings scaled by √hidden.
 *   h = x + post_attention_layernorm(o_proj(attn(input_layernorm(x))))
 *   out = h + post_feedforward_layernorm(down(gelu(gate(m)) · up(m)))     m = pre_feedforward_layernorm(h)
 * Sliding layers keep a ring of KV pages per slot, just over the window (engine/kv_ring.ts).
 * @module
 */
import { LoaderError } from "../errors.ts";
import { ConfigReader, readRope, ropeTables } from "../loader/config.ts";
import type { LinearGroup } from "../loader/weights.ts";
import type { Linear } from "../ops/linear.ts";
import { addNorm } from "../engine/step_hybrid.ts";
import { type AttentionWeights, loadAttention, loadSwiGLU, readLayerTypes } from "./blocks.ts";
import { type DecoderConfig, parseDecoderConfig } from "./llama.ts";
import type { Architecture, HybridDims, LayerSpec } from "./model.ts";

export interface Gemma3Config extends DecoderConfig {
  layers: LayerSpec[];
  hybrid: HybridDims & { window: number };
  /** The sliding layers' RoPE (the global layers' is `rope`). */
  localRope: DecoderConfig["rope"];
  scale: number;
}

export interface Gemma3Weights {
  embed_tokens: Linear;
  layers: {
    attn: AttentionWeights;
    post_attention_layernorm: GPUBuffer;
    pre_feedforward_layernorm: GPUBuffer;
    post_feedforward_layernorm: GPUBuffer;
    gate_up: LinearGroup;
    down: LinearGroup;
  }[];
  norm: GPUBuffer;
  lm_head: LinearGroup;
  /** The sliding layers' RoPE inverse frequencies. */
  localInvFreq: GPUBuffer;
}

function parseConfig(c: ConfigReader): Gemma3Config {
  const act = String(c.json.hidden_activation ?? c.json.hidden_act ?? "gelu_pytorch_tanh");
  if (act !== "gelu_pytorch_tanh") {
    throw new LoaderError(c.file, "hidden_activation", `"${act}": only gelu_pytorch_tanh is supported`);
  }
  // Newer configs nest RoPE per layer type; older ones give rope_theta and rope_local_base_freq.
  const rp = c.obj("rope_parameters");
  const nested = (t: string) =>
    rp?.obj(t) ? new ConfigReader(c.file, { ...c.json, rope_parameters: rp.json[t] }) : null;
  const global = nested("full_attention") ?? c;
  const local = nested("sliding_attention") ??
    new ConfigReader(c.file, { rope_theta: c.num("rope_local_base_freq", 1e4) });
  const base = parseDecoderConfig(global, { defaultTheta: 1e6, qkNorm: true, headDimKey: true });
  const pattern = c.int("sliding_window_pattern", c.int("_sliding_window_pattern", 6));
  const mixers = readLayerTypes(
    c,
    base.dims.layers,
    { sliding_attention: "sliding_attention", full_attention: "attention" },
    (i) => (i + 1) % pattern === 0 ? "attention" : "sliding_attention",
  );
  return {
    ...base,
    layers: mixers.map((mixer) => ({ mixer, mlp: "dense" })),
    hybrid: { window: c.int("sliding_window") },
    localRope: readRope(local, base.dims.hd, 1e4),
    scale: 1 / Math.sqrt(c.num("query_pre_attn_scalar", base.dims.hd)),
  };
}

export const gemma3_text: Architecture<Gemma3Config, Gemma3Weights> = {
  modelType: "gemma3_text",
  parseConfig,
  async loadWeights(l, c) {
    const d = c.dims;
    const H = d.hidden;
    const plusOne = { plusOne: true };
    const embed_tokens = await l.linear("model.embed_tokens", d.vocab, H);
    const layers: Gemma3Weights["layers"] = [];
    for (let i = 0; i < d.layers; i++) {
      const p = `model.layers.${i}`;
      layers.push({
        attn: await loadAttention(l, p, c, { plusOne: true, gated: false }),
        post_attention_layernorm: await l.vector(`${p}.post_attention_layernorm.weight`, H, plusOne),
        pre_feedforward_layernorm: await l.vector(`${p}.pre_feedforward_layernorm.weight`, H, plusOne),
        post_feedforward_layernorm: await l.vector(`${p}.post_feedforward_layernorm.weight`, H, plusOne),
        ...await loadSwiGLU(l, `${p}.mlp`, d.intermediate, H),
      });
    }
    return {
      embed_tokens,
      layers,
      norm: await l.vector("model.norm.weight", H, plusOne),
      lm_head: l.has("lm_head.weight")
        ? await l.group(["lm_head"], [d.vocab], H)
        : { N: d.vocab, K: H, parts: [{ w: embed_tokens, nOff: 0 }] },
      localInvFreq: l.uploadF32("inv_freq_local", ropeTables(c.localRope).invFreq),
    };
  },
  async forward(g, w, c) {
    await g.begin();
    await g.embed(w.embed_tokens, Math.sqrt(c.dims.hidden));
    for (const [i, l] of w.layers.entries()) {
      const sliding = c.layers[i].mixer === "sliding_attention";
      const a = l.attn;
      await g.normLinear(a.input_layernorm, a.qkv, "qkv");
      await g.attention(i, {
        qNorm: a.q_norm,
        kNorm: a.k_norm,
        scale: c.scale,
        ...(sliding ? { window: c.hybrid.window, invFreq: w.localInvFreq } : {}),
      });
      await g.linear("attn", a.o_proj, "xn");
      await addNorm(g, "xn", l.post_attention_layernorm);
      await g.normSwiGLU(l.pre_feedforward_layernorm, l.gate_up, "gelu_tanh");
      await g.linear("h", l.down, "xn");
      await addNorm(g, "xn", l.post_feedforward_layernorm);
    }
    await g.logits(w.norm, w.lm_head);
  },
};

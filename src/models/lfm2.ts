/**
 * LFM2 / LFM2.5 (HF `Lfm2ForCausalLM`; mlx-lm `models/lfm2.py`): a hybrid of gated short-convolution layers
 * and GQA attention layers (per-head q/k RMSNorm), each followed by a SwiGLU MLP; the final norm is called
 * `embedding_norm`. A conv layer keeps its last L_cache − 1 inputs per sequence instead of KV pages:
 *   [B | C | x] = in_proj(n);  x += out_proj(C · conv1d(B · x))       n = operator_norm(x)
 *   out = h + w2(silu(w1(m)) · w3(m))                                  m = ffn_norm(h)
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { ConfigReader } from "../loader/config.ts";
import type { LinearGroup } from "../loader/weights.ts";
import type { Linear } from "../ops/linear.ts";
import { shortConv, type ShortConvWeights } from "../engine/step_hybrid.ts";
import {
  type AttentionWeights,
  forwardAttention,
  loadAttention,
  loadSwiGLU,
  readLayerTypes,
} from "./blocks.ts";
import { type DecoderConfig, parseDecoderConfig } from "./llama.ts";
import type { Architecture, HybridDims, LayerSpec } from "./model.ts";

export interface Lfm2Config extends DecoderConfig {
  layers: LayerSpec[];
  hybrid: HybridDims;
}

type Lfm2Layer =
  | { kind: "conv"; ln: GPUBuffer; conv: ShortConvWeights }
  | { kind: "attention"; attn: AttentionWeights };

export interface Lfm2Weights {
  embed_tokens: Linear;
  layers: { mixer: Lfm2Layer; ffn_norm: GPUBuffer; gate_up: LinearGroup; down: LinearGroup }[];
  norm: GPUBuffer;
  lm_head: LinearGroup;
}

/** The MLP width: `intermediate_size`, or with block_auto_adjust_ff_dim ⅔ of it, scaled and rounded up. */
function ffDim(c: ConfigReader): number {
  let ff = c.int("block_ff_dim", c.int("intermediate_size"));
  if (c.bool("block_auto_adjust_ff_dim", false)) {
    ff = Math.floor((2 * ff) / 3);
    if (c.has("block_ffn_dim_multiplier")) ff = Math.floor(c.num("block_ffn_dim_multiplier") * ff);
    const m = c.int("block_multiple_of", 256);
    ff = m * Math.ceil(ff / m);
  }
  return ff;
}

function parseConfig(c: ConfigReader): Lfm2Config {
  const base = parseDecoderConfig(c, { defaultTheta: 1e6, qkNorm: true, headDimKey: false });
  const idxs = new Set<number>(Array.isArray(c.json.full_attn_idxs) ? c.json.full_attn_idxs : []);
  const mixers = readLayerTypes(
    c,
    base.dims.layers,
    { conv: "short_conv", full_attention: "attention" },
    (i) => idxs.has(i) ? "attention" : "short_conv",
  );
  if (c.bool("conv_bias", false)) throw new LoaderError(c.file, "conv_bias", "conv biases are not supported");
  return {
    ...base,
    dims: { ...base.dims, eps: c.num("norm_eps", 1e-5), intermediate: ffDim(c) },
    layers: mixers.map((mixer) => ({ mixer, mlp: "dense" })),
    hybrid: { shortConv: { convKernel: c.int("conv_L_cache", 3) } },
  };
}

export const lfm2: Architecture<Lfm2Config, Lfm2Weights> = {
  modelType: "lfm2",
  parseConfig,
  async loadWeights(l, c) {
    const d = c.dims;
    const H = d.hidden;
    const K = c.hybrid.shortConv!.convKernel;
    const embed_tokens = await l.linear("model.embed_tokens", d.vocab, H);
    const layers: Lfm2Weights["layers"] = [];
    for (let i = 0; i < d.layers; i++) {
      const p = `model.layers.${i}`;
      let mixer: Lfm2Layer;
      if (c.layers[i].mixer === "attention") {
        const names = {
          qNorm: "q_layernorm",
          kNorm: "k_layernorm",
          out: "out_proj",
          inputNorm: "operator_norm",
        };
        mixer = {
          kind: "attention",
          attn: await loadAttention(l, p, c, { plusOne: false, gated: false, ...names }),
        };
      } else {
        const w = `${p}.conv.conv.weight`;
        // MLX conversions store the depthwise kernel as [H, K, 1], HF as [H, 1, K]: the same values in order.
        const shape = l.shape(w)?.[2] === 1 ? [H, K, 1] : [H, 1, K];
        mixer = {
          kind: "conv",
          ln: await l.vector(`${p}.operator_norm.weight`, H),
          conv: {
            in_proj: await l.group([`${p}.conv.in_proj`], [3 * H], H),
            conv: await l.array(w, shape),
            out_proj: await l.group([`${p}.conv.out_proj`], [H], H),
          },
        };
      }
      layers.push({
        mixer,
        ffn_norm: await l.vector(`${p}.ffn_norm.weight`, H),
        ...await loadSwiGLU(l, `${p}.feed_forward`, d.intermediate, H, ["w1", "w3", "w2"]),
      });
    }
    return {
      embed_tokens,
      layers,
      norm: await l.vector("model.embedding_norm.weight", H),
      lm_head: l.has("lm_head.weight")
        ? await l.group(["lm_head"], [d.vocab], H)
        : { N: d.vocab, K: H, parts: [{ w: embed_tokens, nOff: 0 }] },
    };
  },
  async forward(g, w) {
    await g.begin();
    await g.embed(w.embed_tokens);
    for (const [i, l] of w.layers.entries()) {
      if (l.mixer.kind === "attention") await forwardAttention(g, i, l.mixer.attn);
      else await shortConv(g, i, l.mixer.ln, l.mixer.conv);
      await g.normSwiGLU(l.ffn_norm, l.gate_up);
      await g.linear("h", l.down, "x");
    }
    await g.logits(w.norm, w.lm_head);
  },
};

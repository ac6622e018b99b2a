/**
 * Qwen3-Next (HF `Qwen3NextForCausalLM`; mlx-lm `models/qwen3_next.py`): a hybrid where most layers mix tokens
 * with a gated DeltaNet (a fixed-size recurrent state per sequence) and every `full_attention_interval`-th
 * layer with gated full attention; MLPs are sparse MoE with a shared expert. Norms are `(1 + w)`-style.
 *   DeltaNet: [q k v z b a] = in_proj(n); q,k,v = silu(conv1d(q k v)); o = delta_rule(l2n(q), l2n(k), v,
 *             β = σ(b), g = −e^A_log·softplus(a + dt_bias)); x += out_proj(rmsNorm(o)·w·silu(z))
 *   attention: q|gate = q_proj(n) per head; x += o_proj(attn(rope(q_norm(q)), rope(k_norm(k)), v)·σ(gate))
 *              with RoPE on the first partial_rotary_factor of each head
 * HF checkpoints interleave q/k/v/z (and b/a) per key-head group; they load de-interleaved through row
 * ranges. MLX conversions keep that layout but store conv1d as [C, K, 1] and norms already as 1 + w.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { ConfigReader } from "../loader/config.ts";
import type { LinearGroup, WeightRef, WeightSource } from "../loader/weights.ts";
import type { Linear } from "../ops/linear.ts";
import { deltaNet, type DeltaNetWeights } from "../engine/step_hybrid.ts";
import type { StepGraph } from "../engine/step.ts";
import {
  type AttentionWeights,
  forwardAttention,
  forwardMlp,
  loadAttention,
  loadMlp,
  type MlpWeights,
  readLayerTypes,
  readMoe,
} from "./blocks.ts";
import { type DecoderConfig, parseDecoderConfig } from "./llama.ts";
import type { Architecture, HybridDims, LayerSpec } from "./model.ts";

export interface HybridConfig extends DecoderConfig {
  layers: LayerSpec[];
  hybrid: HybridDims & { deltanet: NonNullable<HybridDims["deltanet"]> };
}

export type HybridLayer =
  | { kind: "deltanet"; ln: GPUBuffer; mixer: DeltaNetWeights; mlp: MlpWeights }
  | { kind: "attention"; attn: AttentionWeights; mlp: MlpWeights };

export interface HybridWeights {
  embed_tokens: Linear;
  layers: HybridLayer[];
  norm: GPUBuffer;
  lm_head: LinearGroup;
}

/**
 * The config of Qwen3-Next and Qwen3.5 (dense or MoE): layer types, DeltaNet shapes, MoE fields (`renormalize`:
 * the router's default where the config has no norm_topk_prob).
 */
export function parseHybridConfig(c: ConfigReader, renormalize = false): HybridConfig {
  const base = parseDecoderConfig(c, { defaultTheta: 1e4, qkNorm: true, headDimKey: true });
  const interval = c.int("full_attention_interval", 4);
  const mixers = readLayerTypes(
    c,
    base.dims.layers,
    { linear_attention: "gated_deltanet", full_attention: "attention" },
    (i) => (i + 1) % interval === 0 ? "attention" : "gated_deltanet",
  );
  const nk = c.int("linear_num_key_heads");
  const nv = c.int("linear_num_value_heads");
  if (nv % nk !== 0) {
    throw new LoaderError(c.file, "linear_num_value_heads", `${nv} is not a multiple of ${nk} key heads`);
  }
  const deltanet = {
    nk,
    nv,
    dk: c.int("linear_key_head_dim"),
    dv: c.int("linear_value_head_dim"),
    convKernel: c.int("linear_conv_kernel_dim", 4),
  };
  const m = readMoe(c, renormalize);
  const layers = mixers.map((mixer, i): LayerSpec => ({ mixer, mlp: m?.isMoe(i) ? "moe" : "dense" }));
  return { ...base, layers, hybrid: { deltanet, gatedAttention: true, ...(m ? { moe: m.moe } : {}) } };
}

type DeltaDims = HybridConfig["hybrid"]["deltanet"];
/** A layer's DeltaNet input projections as [weight, rows] in the engine's q|k|v|z|b|a column order. */
export type Projections = (a: string, d: DeltaDims) => [WeightRef, number][];

/** Qwen3-Next's in_proj_qkvz / in_proj_ba rows, de-interleaved from per-key-head groups into q|k|v|z|b|a. */
function nextProjections(a: string, d: DeltaDims): [WeightRef, number][] {
  const r = d.nv / d.nk;
  const groups = (block: number, off: number, n: number): [number, number][] =>
    Array.from({ length: d.nk }, (_, g) => [g * block + off, n] as [number, number]);
  const qkvz = 2 * d.dk + 2 * r * d.dv;
  const rows = (path: string, block: number, off: number, n: number): WeightRef => ({
    path,
    rows: groups(block, off, n),
  });
  const p = `${a}.in_proj_qkvz`;
  const ba = `${a}.in_proj_ba`;
  const [Kd, Vd] = [d.nk * d.dk, d.nv * d.dv];
  return [
    [rows(p, qkvz, 0, d.dk), Kd],
    [rows(p, qkvz, d.dk, d.dk), Kd],
    [rows(p, qkvz, 2 * d.dk, r * d.dv), Vd],
    [rows(p, qkvz, 2 * d.dk + r * d.dv, r * d.dv), Vd],
    [rows(ba, 2 * r, 0, r), d.nv],
    [rows(ba, 2 * r, r, r), d.nv],
  ];
}

/** Whether the checkpoint is an MLX conversion (conv1d [C, K, 1]; norms stored as 1 + w already). */
export function isMlxLayout(l: WeightSource, c: HybridConfig): boolean {
  const i = c.layers.findIndex((s) => s.mixer === "gated_deltanet");
  const s = l.shape(`model.layers.${i}.linear_attn.conv1d.weight`);
  return !!s && s.length === 3 && s[2] === 1 && c.hybrid.deltanet.convKernel > 1;
}

/** A hybrid checkpoint's weights; `projections` names the DeltaNet input projections of layer prefix `a`. */
export async function loadHybrid(
  l: WeightSource,
  c: HybridConfig,
  projections: Projections,
): Promise<HybridWeights> {
  const d = c.dims;
  const dn = c.hybrid.deltanet;
  const plusOne = !isMlxLayout(l, c);
  const embed_tokens = await l.linear("model.embed_tokens", d.vocab, d.hidden);
  const Kd = dn.nk * dn.dk;
  const Vd = dn.nv * dn.dv;
  const C = 2 * Kd + Vd;
  const layers: HybridLayer[] = [];
  for (let i = 0; i < d.layers; i++) {
    const p = `model.layers.${i}`;
    const mlp = await loadMlp(l, p, c, c.layers[i].mlp, plusOne);
    if (c.layers[i].mixer === "attention") {
      layers.push({ kind: "attention", attn: await loadAttention(l, p, c, { plusOne, gated: true }), mlp });
      continue;
    }
    const a = `${p}.linear_attn`;
    const conv = `${a}.conv1d.weight`;
    const proj = projections(a, dn);
    const convShape = l.shape(conv)?.[2] === 1 ? [C, dn.convKernel, 1] : [C, 1, dn.convKernel];
    layers.push({
      kind: "deltanet",
      ln: await l.vector(`${p}.input_layernorm.weight`, d.hidden, { plusOne }),
      mixer: {
        in_proj: await l.group(proj.map(([w]) => w), proj.map(([, n]) => n), d.hidden),
        conv1d: await l.array(conv, convShape),
        A_log: await l.array(`${a}.A_log`, [dn.nv]),
        dt_bias: await l.array(`${a}.dt_bias`, [dn.nv]),
        norm: await l.vector(`${a}.norm.weight`, dn.dv),
        out_proj: await l.group([`${a}.out_proj`], [d.hidden], Vd),
      },
      mlp,
    });
  }
  return {
    embed_tokens,
    layers,
    norm: await l.vector("model.norm.weight", d.hidden, { plusOne }),
    lm_head: l.has("lm_head.weight")
      ? await l.group(["lm_head"], [d.vocab], d.hidden)
      : { N: d.vocab, K: d.hidden, parts: [{ w: embed_tokens, nOff: 0 }] },
  };
}

export async function forwardHybrid(g: StepGraph, w: HybridWeights): Promise<void> {
  await g.begin();
  await g.embed(w.embed_tokens);
  for (const [i, l] of w.layers.entries()) {
    if (l.kind === "attention") await forwardAttention(g, i, l.attn);
    else await deltaNet(g, i, l.ln, l.mixer);
    await forwardMlp(g, l.mlp);
  }
  await g.logits(w.norm, w.lm_head);
}

export const qwen3_next: Architecture<HybridConfig, HybridWeights> = {
  modelType: "qwen3_next",
  parseConfig: parseHybridConfig,
  loadWeights: (l, c) => loadHybrid(l, c, nextProjections),
  forward: (g, w) => forwardHybrid(g, w),
};

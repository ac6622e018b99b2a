/**
 * Why the hybrid fixtures' HF goldens differ from Flint by an error that grows with position: an independent
 * float64 CPU forward of the LFM2 fixture (short conv + attention), compared per position with the golden
 * logits, with RoPE's inverse frequencies exact or rounded to bf16 (`--bf16-inv-freq`). Exact frequencies
 * reproduce Flint's logits (to 1e-5) and miss the goldens by up to 3.4e-3; bf16-rounded ones reproduce the
 * goldens (to 6e-6). bench/NOTES.md, "Hybrid and MoE fixtures".
 *
 *   deno run -A bench/experiments/golden_rope_check.ts [--bf16-inv-freq]
 * @module
 */
import { readHeader, readTensorBytes, toFloat32 } from "../../src/loader/safetensors.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { FIXTURES, readGolden } from "../../test/util/fixtures.ts";

/** Rounds to the nearest bf16 (ties to even), as a model-wide bf16 cast does to HF's inv_freq buffer. */
const bf16r = (x: number) => {
  const b = new Float32Array([x]);
  const u = new Uint32Array(b.buffer);
  u[0] = (u[0] + 0x7fff + ((u[0] >> 16) & 1)) & 0xffff0000;
  return b[0];
};
const ROPEBF = Deno.args.includes("--bf16-inv-freq");
const dir = `${FIXTURES}/lfm2`;
const src = new DiskModelSource(dir);
const h = await readHeader(src, "model.safetensors");
const W = async (n: string) =>
  Float64Array.from(toFloat32(await readTensorBytes(src, h.tensors.get(n)!), h.tensors.get(n)!.dtype));
const cfg = JSON.parse(await Deno.readTextFile(`${dir}/config.json`));
const H = 64, nq = 4, nkv = 2, hd = 16, I = 128, V = 512, eps = cfg.norm_eps, theta = 1e6, KC = 3;
const g = await readGolden(dir);
const T = g.inputIds.length;
const mm = (x: Float64Array, w: Float64Array, N: number, K: number) => {
  const y = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    let s = 0;
    for (let k = 0; k < K; k++) s += x[k] * w[n * K + k];
    y[n] = s;
  }
  return y;
};
const rms = (x: Float64Array, w: Float64Array) => {
  let s = 0;
  for (const v of x) s += v * v;
  const r = 1 / Math.sqrt(s / x.length + eps);
  return x.map((v, i) => v * r * w[i]);
};
const emb = await W("model.embed_tokens.weight");
let xs = Array.from({ length: T }, (_, t) => emb.slice(g.inputIds[t] * H, g.inputIds[t] * H + H));
for (let l = 0; l < 4; l++) {
  const p = `model.layers.${l}`;
  const on = await W(`${p}.operator_norm.weight`);
  const n = xs.map((x) => rms(x, on));
  let out: Float64Array[];
  if (cfg.layer_types[l] === "conv") {
    const ip = await W(`${p}.conv.in_proj.weight`),
      cw = await W(`${p}.conv.conv.weight`),
      op = await W(`${p}.conv.out_proj.weight`);
    const bcx = n.map((v) => mm(v, ip, 3 * H, H));
    const bx = bcx.map((v) => Float64Array.from({ length: H }, (_, c) => v[c] * v[2 * H + c]));
    out = bcx.map((v, t) => {
      const y = new Float64Array(H);
      for (let c = 0; c < H; c++) {
        let s = 0;
        for (let i = 0; i < KC; i++) {
          const tt = t - (KC - 1) + i;
          if (tt >= 0) s += cw[c * KC + i] * bx[tt][c];
        }
        y[c] = v[H + c] * s;
      }
      return mm(y, op, H, H);
    });
  } else {
    const a = `${p}.self_attn`;
    const wq = await W(`${a}.q_proj.weight`),
      wk = await W(`${a}.k_proj.weight`),
      wv = await W(`${a}.v_proj.weight`),
      wo = await W(`${a}.out_proj.weight`),
      qn = await W(`${a}.q_layernorm.weight`),
      kn = await W(`${a}.k_layernorm.weight`);
    const rope = (v: Float64Array, pos: number) => {
      const o = Float64Array.from(v);
      for (let i = 0; i < hd / 2; i++) {
        const inv = 1 / Math.pow(theta, (2 * i) / hd);
        const f = pos * (ROPEBF ? bf16r(inv) : inv);
        const c = Math.cos(f), s = Math.sin(f);
        o[i] = v[i] * c - v[i + hd / 2] * s;
        o[i + hd / 2] = v[i + hd / 2] * c + v[i] * s;
      }
      return o;
    };
    const heads = (v: Float64Array, nh: number, w: Float64Array, pos: number) =>
      Array.from({ length: nh }, (_, hh) => rope(rms(v.slice(hh * hd, hh * hd + hd), w), pos));
    const Q = n.map((v, t) => heads(mm(v, wq, nq * hd, H), nq, qn, t));
    const K = n.map((v, t) => heads(mm(v, wk, nkv * hd, H), nkv, kn, t));
    const Vv = n.map((v) => mm(v, wv, nkv * hd, H));
    out = Q.map((q, t) => {
      const o = new Float64Array(nq * hd);
      for (let hh = 0; hh < nq; hh++) {
        const kh = Math.floor(hh / (nq / nkv));
        const sc = Array.from({ length: t + 1 }, (_, j) => {
          let s = 0;
          for (let d = 0; d < hd; d++) s += q[hh][d] * K[j][kh][d];
          return s / Math.sqrt(hd);
        });
        const m = Math.max(...sc);
        const e = sc.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let j = 0; j <= t; j++) {
          for (let d = 0; d < hd; d++) o[hh * hd + d] += (e[j] / z) * Vv[j][kh * hd + d];
        }
      }
      return mm(o, wo, H, nq * hd);
    });
  }
  xs = xs.map((x, t) => x.map((v, i) => v + out[t][i]));
  const fn = await W(`${p}.ffn_norm.weight`),
    w1 = await W(`${p}.feed_forward.w1.weight`),
    w3 = await W(`${p}.feed_forward.w3.weight`),
    w2 = await W(`${p}.feed_forward.w2.weight`);
  xs = xs.map((x) => {
    const m = rms(x, fn);
    const gg = mm(m, w1, I, H), u = mm(m, w3, I, H);
    const hh = gg.map((v, i) => (v / (1 + Math.exp(-v))) * u[i]);
    const d = mm(hh, w2, H, I);
    return x.map((v, i) => v + d[i]);
  });
}
const fnw = await W("model.embedding_norm.weight");
let line = "";
for (let t = 0; t < T; t++) {
  const lg = mm(rms(xs[t], fnw), emb, V, H);
  let w = 0;
  for (let v = 0; v < V; v++) w = Math.max(w, Math.abs(lg[v] - g.logits[t * V + v]));
  line += `${t}:${w.toExponential(1)} `;
}
console.log(line);

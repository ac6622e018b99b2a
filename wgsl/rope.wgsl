// Per-head Q/K preparation after the fused QKV projection, and the KV-cache write:
//   q head h:  q[r, h, :] = rope(norm_q(qkv[r, q_h, :]))                        -> q (act)
//   kv head h: K = rope(norm_k(qkv[r, k_h, :])), V = qkv[r, v_h, :]              -> KV page of (slot, pos)
// norm (QK_NORM, Qwen3): RMSNorm over head_dim with a shared [head_dim] weight, before RoPE.
// RoPE, rotate-half ("NeoX") over the first `rot` dims (partial rotary passes the rest through):
//   pairs (i, i + rot/2), angle = pos · inv_freq[i], both halves scaled by `mscale` (YaRN; 1 otherwise).
//   inv_freq comes from the host, so default/linear/llama3/yarn scaling are all just a table.
// Bindings:  rows     (R)                     step rows: pos, slot
//            qkv      (R, (nq + 2·nkv)·hd) act
//            inv_freq (rot/2) f32
//            qn, kn   (hd) f32                (QK_NORM)
//            pages    (slots, max_pages) u32  page table
//            kv       (pages, 2, nkv, ps, hd) act   this layer's KV pool: K then V in each page
//                     KV8: the same layout as q8 codes (u32 of 4), kvs (pages, 2, nkv, ps, hd/QB) f32 scales
//            q        (R, nq·hd) act
// Grid: (rows, nq + nkv); one workgroup per (row, head), rows row0 .. (decode rows fuse this into
// attention_decode.wgsl, so the engine runs it on prefill rows only).
#include "lib/common.wgsl"
#include "lib/rope.wgsl"
#ifdef KV8
#include "lib/kv8.wgsl"
#endif

override WG: u32 = 64;
#include "lib/reduce.wgsl"

struct Params {
  row0: u32,       // first step row handled
  min_len: u32,    // rows with pos + 1 < min_len are skipped (decode rows whose attention does this itself)
  nq: u32,         // query heads
  nkv: u32,        // key/value heads
  hd: u32,         // head dim (elements)
  rot: u32,        // rotated dims (even, ≤ hd)
  ps: u32,         // page size (tokens)
  max_pages: u32,  // page-table row length per slot
  eps: f32,        // QK norm epsilon
  mscale: f32,     // RoPE attention factor (YaRN), 1 otherwise
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> qkv: array<act>;
@group(0) @binding(3) var<storage, read> inv_freq: array<f32>;
#ifdef QK_NORM
@group(0) @binding(4) var<storage, read> qn: array<f32>;
@group(0) @binding(5) var<storage, read> kn: array<f32>;
#endif
@group(0) @binding(6) var<storage, read> pages: array<u32>;
#ifdef KV8
@group(0) @binding(7) var<storage, read_write> kv: array<u32>;
@group(0) @binding(9) var<storage, read_write> kvs: array<f32>;
// The rotated K and the V of a kv head (their blocks are quantized once all values are known).
var<workgroup> kvh: array<f32, 1024>;
#else
@group(0) @binding(7) var<storage, read_write> kv: array<act>;
#endif
@group(0) @binding(8) var<storage, read_write> q: array<act>;

var<workgroup> hv: array<f32, 512>;  // one head (hd ≤ 512)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.x;
  let h = wid.y;
  let nq = params.nq;
  let nkv = params.nkv;
  let hd = params.hd;
  let width = (nq + 2u * nkv) * hd;
  let row = rows[r];
  if (row.pos + 1u < params.min_len) { return; }
  let is_q = h < nq;
  let src = r * width + h * hd;  // q heads then k heads: contiguous in qkv

  var ss = 0.0;
  for (var d = lid; d < hd; d += WG) {
    let v = f32(qkv[src + d]);
    hv[d] = v;
    ss = fma(v, v, ss);
  }
#ifdef QK_NORM
  let inv = inverseSqrt(wg_sum(ss, lid) / f32(hd) + params.eps);
  for (var d = lid; d < hd; d += WG) {
    hv[d] = hv[d] * inv * select(kn[d], qn[d], is_q);
  }
#endif
  workgroupBarrier();

  let half = params.rot / 2u;
  let pos = f32(row.pos);
  var dst = 0u;
  var vsrc = 0u;
  if (is_q) {
    dst = r * nq * hd + h * hd;
  } else {
    let kh = h - nq;
    let page = pages[row.slot * params.max_pages + row.pos / params.ps];
    dst = ((page * 2u) * nkv + kh) * params.ps * hd + (row.pos % params.ps) * hd;
    vsrc = r * width + (nq + nkv + kh) * hd;
  }
  for (var d = lid; d < hd; d += WG) {
    var o = hv[d];
    if (d < params.rot) {
      let i = select(d, d - half, d >= half);
      let cs = cos_sin(pos * inv_freq[i]);
      if (d < half) {
        o = hv[d] * cs.x - hv[d + half] * cs.y;
      } else {
        o = hv[d] * cs.x + hv[d - half] * cs.y;
      }
      o = o * params.mscale;
    }
    if (is_q) {
      q[dst + d] = act(o);
    } else {
#ifdef KV8
      kvh[d] = o;
      kvh[512u + d] = f32(qkv[vsrc + d]);
#else
      kv[dst + d] = act(o);
      kv[dst + nkv * params.ps * hd + d] = qkv[vsrc + d];  // V lives nkv·ps·hd after K in the page
#endif
    }
  }
#ifdef KV8
  // Quantize K then V by blocks of QB: each lane packs 4 values (and the block's first lane its scale),
  // taking the block's max over workgroup memory (QB reads; this runs once per prefill token and head).
  workgroupBarrier();
  if (!is_q) {
    let w4 = hd / 4u;
    for (var e = lid; e < 2u * w4; e += WG) {
      let which = e / w4;
      let d = (e % w4) * 4u;
      let src = which * 512u;
      let b0 = src + (d / QB) * QB;
      var amax = 0.0;
      for (var i = 0u; i < QB; i++) { amax = max(amax, abs(kvh[b0 + i])); }
      let x = vec4<f32>(kvh[src + d], kvh[src + d + 1u], kvh[src + d + 2u], kvh[src + d + 3u]);
      let o = dst + which * nkv * params.ps * hd + d;  // V lives nkv·ps·hd after K in the page
      kv[o / 4u] = kv8_pack(x, kv8_inv(amax));
      if (d % QB == 0u) { kvs[o / QB] = amax / 127.0; }
    }
  }
#endif
}

// Gated delta rule, chunked (WY) form for prefill segments, 3 of 3: the outputs and the gated RMSNorm
// (fla chunk_fwd_o + Qwen3NextRMSNormGated). Per chunk, from its starting state S₀ (hs) and its deltas V'
// (gated_delta_chunk_state.wgsl), with q̂ = l2n(q)·scale and k̂ = l2n(k):
//   o_t = e^(G_t)·S₀ᵀq̂_t + Σ_{j≤t} P_tj·V'_j,  P_tj = e^(G_t − G_j)·q̂_t·k̂_j
//   out[t, h·dv + j] = o_j · rsqrt(mean(o²) + eps) · norm[j] · silu(z_j)   (gated_delta.wgsl's norm)
// Bindings:  rows    (R)                               step rows: pos of the segment's first row
//            conv    (R, 2·nk·DK + nv·dv) f32           q, k read here
//            src     (R, lds) act|f32                   z at z_off + h·dv + j
//            norm    (dv) f32
//            wu      (chunks, nv, C, DK + dv) f32       V' at column DK + j
//            aux     (chunks, nv, C) vec4<f32>          (g, 1/‖k‖, scale/‖q‖, ·)
//            hs      (chunks, nv, DK, dv) f32           S₀ of each chunk
//            out     (R, nv·dv) f32                     the segment's rows
// Grid: (⌈(len + C − 1) / C⌉, nv), as gated_delta_chunk_wy.wgsl. 256 lanes: lane (a, b) takes rows
// a + 16m and columns b + 16n (n < JN = ⌈dv / 16⌉) of o, and of P the rows a + 16m, columns b + 16n.
// Workgroup memory (C = 64, dv = 128): P 16 KiB (K's slab while q·kᵀ is summed, then the decay mask, P,
// and the norm's partials), a (C, KB) slab of q 2.25 KiB, a (KB, 16·JN) slab of S₀ or V' 4 KiB, 4·C
// scalars 1 KiB.
// Defines: C (16, 32 or 64), DK, JN.
#include "lib/common.wgsl"
#include "lib/delta.wgsl"

const C: u32 = {{C}}u;
const DK: u32 = {{DK}}u;
const JN: u32 = {{JN}}u;
const WG: u32 = 256u;
const RM: u32 = C / 16u;  // rows per lane
const KB: u32 = 8u;       // slab depth
const KS: u32 = KB + 1u;
const DVS: u32 = 16u * JN;

struct Params {
  row0: u32,   // the segment's first row
  len: u32,    // its rows
  cbase: u32,  // its first scratch chunk
  nk: u32,     // key heads
  nv: u32,     // value heads
  dv: u32,     // value head dim
  lds: u32,    // src row stride (elements)
  z_off: u32,  // src column of z
  eps: f32,    // gated-norm epsilon
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> conv: array<f32>;
#ifdef SRC_F32
@group(0) @binding(3) var<storage, read> src: array<f32>;
#else
@group(0) @binding(3) var<storage, read> src: array<act>;
#endif
@group(0) @binding(4) var<storage, read> norm: array<f32>;
// wu, aux and hs are ranges of one scratch buffer: WebGPU lets one dispatch bind a buffer several times
// only if every binding is read-only or every one is read_write.
@group(0) @binding(5) var<storage, read_write> wu: array<f32>;
@group(0) @binding(6) var<storage, read_write> aux: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> hs: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;

var<workgroup> tm: array<f32, C * C>;  // P
var<workgroup> sa: array<f32, C * KS>;
var<workgroup> sb: array<f32, KB * DVS>;
var<workgroup> gs: array<f32, C>;  // g
var<workgroup> eg: array<f32, C>;  // e^G
var<workgroup> rk: array<f32, C>;  // 1/‖k‖
var<workgroup> rq: array<f32, C>;  // scale/‖q‖

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y;
  let c = wid.x;
  let nv = params.nv;
  let dv = params.dv;
  let kh = h / (nv / params.nk);
  let width = 2u * params.nk * DK + nv * dv;
  let kcol = (params.nk + kh) * DK;
  let row0 = params.row0;
  let len = params.len;
  let off = rows[row0].pos % C;
  if (c >= (off + len + C - 1u) / C) { return; }
  let cs = params.cbase + c;
  let a = lid / 16u;
  let b = lid % 16u;

  if (lid < C) {
    let x = aux[(cs * nv + h) * C + lid];
    gs[lid] = x.x;
    rk[lid] = x.y;
    rq[lid] = x.z;
  }

  // P = (q·kᵀ of the raw vectors) scaled and decay-masked; K's slab sits in tm until P is written.
  var pacc: array<f32, RM * RM>;
  for (var k0 = 0u; k0 < DK; k0 += KB) {
    for (var e = lid; e < C * KB; e += WG) {
      let t = e / KB;
      let i = k0 + e % KB;
      let r = delta_row(row0, len, off, c * C + t);
      var q = 0.0;
      var k = 0.0;
      if (r >= 0 && i < DK) {
        q = conv[u32(r) * width + kh * DK + i];
        k = conv[u32(r) * width + kcol + i];
      }
      sa[t * KS + e % KB] = q;
      tm[t * KS + e % KB] = k;
    }
    workgroupBarrier();
    for (var e = 0u; e < KB; e++) {
      var x: array<f32, RM>;
      var y: array<f32, RM>;
      for (var m = 0u; m < RM; m++) {
        x[m] = sa[(a + 16u * m) * KS + e];
        y[m] = tm[(b + 16u * m) * KS + e];
      }
      for (var m = 0u; m < RM; m++) {
        for (var n = 0u; n < RM; n++) { pacc[m * RM + n] = fma(x[m], y[n], pacc[m * RM + n]); }
      }
    }
    workgroupBarrier();
  }
  // e^G, and the decay mask e^(G_i − G_j) (j ≤ i) summed as in gated_delta_chunk_wy.wgsl, column lid.
  if (lid < C) {
    var G = 0.0;
    for (var u = 0u; u <= lid; u++) { G += gs[u]; }
    eg[lid] = exp(G);
    var d = 0.0;
    tm[lid * C + lid] = 1.0;
    for (var i = lid + 1u; i < C; i++) {
      d += gs[i];
      tm[i * C + lid] = exp(d);
    }
  }
  workgroupBarrier();
  for (var m = 0u; m < RM; m++) {
    for (var n = 0u; n < RM; n++) {
      let i = a + 16u * m;
      let j = b + 16u * n;
      var p = 0.0;
      if (j <= i) { p = tm[i * C + j] * rq[i] * rk[j] * pacc[m * RM + n]; }
      tm[i * C + j] = p;
    }
  }

  // o = (e^G·q̂)·S₀ over DK, then + P·V' over the chunk's slots.
  let hbase = (cs * nv + h) * DK * dv;
  var acc: array<f32, RM * JN>;
  for (var k0 = 0u; k0 < DK; k0 += KB) {
    for (var e = lid; e < C * KB; e += WG) {
      let t = e / KB;
      let i = k0 + e % KB;
      let r = delta_row(row0, len, off, c * C + t);
      var x = 0.0;
      if (r >= 0 && i < DK) { x = eg[t] * rq[t] * conv[u32(r) * width + kh * DK + i]; }
      sa[t * KS + e % KB] = x;
    }
    for (var e = lid; e < KB * DVS; e += WG) {
      let i = k0 + e / DVS;
      let j = e % DVS;
      var x = 0.0;
      if (i < DK && j < dv) { x = hs[hbase + i * dv + j]; }
      sb[e] = x;
    }
    workgroupBarrier();
    for (var e = 0u; e < KB; e++) {
      for (var m = 0u; m < RM; m++) {
        let x = sa[(a + 16u * m) * KS + e];
        for (var n = 0u; n < JN; n++) {
          acc[m * JN + n] = fma(x, sb[e * DVS + b + 16u * n], acc[m * JN + n]);
        }
      }
    }
    workgroupBarrier();
  }
  let nb = DK + dv;
  let wbase = (cs * nv + h) * C * nb + DK;
  for (var t0 = 0u; t0 < C; t0 += KB) {
    for (var e = lid; e < KB * DVS; e += WG) {
      let j = e % DVS;
      var x = 0.0;
      if (j < dv) { x = wu[wbase + (t0 + e / DVS) * nb + j]; }
      sb[e] = x;
    }
    workgroupBarrier();
    for (var e = 0u; e < KB; e++) {
      for (var m = 0u; m < RM; m++) {
        let p = tm[(a + 16u * m) * C + t0 + e];
        for (var n = 0u; n < JN; n++) {
          acc[m * JN + n] = fma(p, sb[e * DVS + b + 16u * n], acc[m * JN + n]);
        }
      }
    }
    workgroupBarrier();
  }

  // Gated RMSNorm: each row's Σo² from its 16 lanes' partials (in tm), then the segment's rows out.
  for (var m = 0u; m < RM; m++) {
    var ss = 0.0;
    for (var n = 0u; n < JN; n++) {
      if (b + 16u * n < dv) { ss = fma(acc[m * JN + n], acc[m * JN + n], ss); }
    }
    tm[(a + 16u * m) * 16u + b] = ss;
  }
  workgroupBarrier();
  for (var m = 0u; m < RM; m++) {
    let t = a + 16u * m;
    let r = delta_row(row0, len, off, c * C + t);
    if (r < 0) { continue; }
    var ss = 0.0;
    for (var p = 0u; p < 16u; p++) { ss += tm[t * 16u + p]; }
    let inv = inverseSqrt(ss / f32(dv) + params.eps);
    let ob = u32(r) * nv * dv + h * dv;
    let zb = u32(r) * params.lds + params.z_off + h * dv;
    for (var n = 0u; n < JN; n++) {
      let j = b + 16u * n;
      if (j < dv) { out[ob + j] = acc[m * JN + n] * inv * norm[j] * silu(f32(src[zb + j])); }
    }
  }
}

// Gated delta rule, chunked (WY) form for prefill segments, 1 of 3: the WY representation of each chunk
// (fla chunk_gated_delta_rule: chunk_local_cumsum, chunk_scaled_dot_kkt, solve_tril, recompute_w_u; HF
// torch_chunk_gated_delta_rule). The rule and the gates are gated_delta.wgsl's. Within a chunk of C slots
// (aligned to absolute positions, lib/delta.wgsl), with G_t = Σ_{u≤t} g_u and k̂ = l2n(k):
//   A_ij = β_i·e^(G_i − G_j)·k̂_i·k̂_j  (j < i),  T = (I + A)⁻¹  (unit lower triangular)
//   W = T·(β·e^G·k̂)  (C, DK),  U = T·(β·v)  (C, dv)
// so that the chunk's deltas are U − W·S₀ from its starting state S₀ (gated_delta_chunk_state.wgsl).
// Decays are only ever e^(≤ 0). G_i − G_j is summed as Σ_{j<u≤i} g_u (every g ≤ 0, so no cancellation)
// rather than taken as a difference of the cumulative sums: after a steep drop |G| is large, and the
// difference would carry its rounding, ~ulp(|G|), into factors near 1.
// Bindings:  rows    (R)                               step rows: pos of the segment's first row
//            conv    (R, 2·nk·DK + nv·dv) f32           [q | k | v], heads contiguous
//            src     (R, lds) act|f32                   b at b_off + h, a at a_off + h
//            a_log, dt_bias (nv) f32
//            wu      (chunks, nv, C, DK + dv) f32       out: [W | U] per slot
//            aux     (chunks, nv, C) vec4<f32>          out: (g, 1/‖k‖, scale/‖q‖, e^(G_{C−1} − G_t))
//                                                         per slot; (0, 0, 0, ·) for padding
// Grid: (⌈(len + C − 1) / C⌉, nv): a workgroup per (chunk, value head) of the segment; chunks past the
// segment's end (it starts mid-chunk or not) exit. Chunk c of the segment is scratch chunk cbase + c.
// 256 lanes. Workgroup memory (C = 64): T 16 KiB, a (C, KB) slab of K or of [β·e^G·k̂ | β·v] 4.25 KiB,
// 4·C scalars 1 KiB. K·Kᵀ: lane (a, b) sums rows a + 16m, columns b + 16n. The (C, C) array holds the decay
// mask, then A, below the diagonal; T: forward substitution by columns, one barrier per column, T kept
// transposed above the diagonal.
// Defines: C (16, 32 or 64), DK.
#include "lib/common.wgsl"
#include "lib/delta.wgsl"

const C: u32 = {{C}}u;
const DK: u32 = {{DK}}u;
const WG: u32 = 256u;
const RM: u32 = C / 16u;    // K·Kᵀ rows (and columns) per lane
const KB: u32 = 1024u / C;  // slab columns
const KS: u32 = KB + 1u;    // slab row stride
const LT: u32 = WG / C;     // lanes per slot in the norm sums

struct Params {
  row0: u32,   // the segment's first row
  len: u32,    // its rows
  cbase: u32,  // its first scratch chunk
  nk: u32,     // key heads
  nv: u32,     // value heads
  dv: u32,     // value head dim
  lds: u32,    // src row stride (elements)
  b_off: u32,  // src columns of b, a
  a_off: u32,
  scale: f32,  // DK^−½
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> conv: array<f32>;
#ifdef SRC_F32
@group(0) @binding(3) var<storage, read> src: array<f32>;
#else
@group(0) @binding(3) var<storage, read> src: array<act>;
#endif
@group(0) @binding(4) var<storage, read> a_log: array<f32>;
@group(0) @binding(5) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> wu: array<f32>;
@group(0) @binding(7) var<storage, read_write> aux: array<vec4<f32>>;

var<workgroup> tm: array<f32, C * C>;  // e^(G_i − G_j), then A_ij, at [i, j] (j < i); T_ij at [j, i]
var<workgroup> slab: array<f32, C * KS>;
var<workgroup> gs: array<f32, C>;    // g
var<workgroup> eg: array<f32, C>;    // e^G
var<workgroup> bt: array<f32, C>;    // β
var<workgroup> rk: array<f32, C>;    // 1/‖k‖

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

  // Gates per slot, and partial sums of q² and k² (LT lanes per slot).
  let A = -exp(a_log[h]);
  if (lid < C) {
    let r = delta_row(row0, len, off, c * C + lid);
    var b = 0.0;
    var g = 0.0;
    if (r >= 0) {
      let base = u32(r) * params.lds;
      b = 1.0 / (1.0 + exp(-f32(src[base + params.b_off + h])));
      g = A * softplus(f32(src[base + params.a_off + h]) + dt_bias[h]);
    }
    bt[lid] = b;
    gs[lid] = g;
  }
  {
    let r = delta_row(row0, len, off, c * C + lid / LT);
    var kk = 0.0;
    var qq = 0.0;
    if (r >= 0) {
      for (var i = lid % LT; i < DK; i += LT) {
        let kx = conv[u32(r) * width + kcol + i];
        let qx = conv[u32(r) * width + kh * DK + i];
        kk = fma(kx, kx, kk);
        qq = fma(qx, qx, qq);
      }
    }
    slab[lid] = kk;
    slab[WG + lid] = qq;
  }
  workgroupBarrier();
  if (lid < C) {
    var G = 0.0;
    for (var u = 0u; u <= lid; u++) { G += gs[u]; }
    var suf = 0.0;
    for (var u = lid + 1u; u < C; u++) { suf += gs[u]; }
    // Column lid of the decay mask.
    var d = 0.0;
    for (var i = lid + 1u; i < C; i++) {
      d += gs[i];
      tm[i * C + lid] = exp(d);
    }
    var kk = 0.0;
    var qq = 0.0;
    for (var p = 0u; p < LT; p++) {
      kk += slab[lid * LT + p];
      qq += slab[WG + lid * LT + p];
    }
    let pad = delta_row(row0, len, off, c * C + lid) < 0;
    let rkv = select(inverseSqrt(kk + 1e-6), 0.0, pad);
    let rqv = select(inverseSqrt(qq + 1e-6) * params.scale, 0.0, pad);
    eg[lid] = exp(G);
    rk[lid] = rkv;
    aux[(cs * nv + h) * C + lid] = vec4<f32>(gs[lid], rkv, rqv, exp(suf));
  }
  workgroupBarrier();

  // K·Kᵀ of the raw keys, KB dims at a time.
  let a = lid / 16u;
  let b = lid % 16u;
  var acc: array<f32, RM * RM>;
  for (var k0 = 0u; k0 < DK; k0 += KB) {
    for (var e = lid; e < C * KB; e += WG) {
      let t = e / KB;
      let i = k0 + e % KB;
      let r = delta_row(row0, len, off, c * C + t);
      var x = 0.0;
      if (r >= 0 && i < DK) { x = conv[u32(r) * width + kcol + i]; }
      slab[t * KS + e % KB] = x;
    }
    workgroupBarrier();
    for (var e = 0u; e < KB; e++) {
      var x: array<f32, RM>;
      var y: array<f32, RM>;
      for (var m = 0u; m < RM; m++) {
        x[m] = slab[(a + 16u * m) * KS + e];
        y[m] = slab[(b + 16u * m) * KS + e];
      }
      for (var m = 0u; m < RM; m++) {
        for (var n = 0u; n < RM; n++) { acc[m * RM + n] = fma(x[m], y[n], acc[m * RM + n]); }
      }
    }
    workgroupBarrier();
  }
  for (var m = 0u; m < RM; m++) {
    for (var n = 0u; n < RM; n++) {
      let i = a + 16u * m;
      let j = b + 16u * n;
      if (j < i) {
        let v = bt[i] * tm[i * C + j] * rk[i] * rk[j] * acc[m * RM + n];
        tm[i * C + j] = v;
        tm[j * C + i] = -v;
      }
    }
  }
  workgroupBarrier();

  // T_ij = −A_ij − Σ_{j<m<i} A_im·T_mj, by columns m: once T's row m is final it updates every later row.
  for (var m = 1u; m + 1u < C; m++) {
    for (var e = lid; e < (C - 1u - m) * m; e += WG) {
      let i = m + 1u + e / m;
      let j = e % m;
      tm[j * C + i] = fma(-tm[i * C + m], tm[j * C + m], tm[j * C + i]);
    }
    workgroupBarrier();
  }

  // [W | U] = T·[β·e^G·k̂ | β·v], KB columns at a time.
  let nb = DK + dv;
  let wbase = (cs * nv + h) * C * nb;
  for (var c0 = 0u; c0 < nb; c0 += KB) {
    for (var e = lid; e < C * KB; e += WG) {
      let t = e / KB;
      let col = c0 + e % KB;
      let r = delta_row(row0, len, off, c * C + t);
      var x = 0.0;
      if (r >= 0 && col < DK) {
        x = bt[t] * eg[t] * rk[t] * conv[u32(r) * width + kcol + col];
      } else if (r >= 0 && col < nb) {
        x = bt[t] * conv[u32(r) * width + 2u * params.nk * DK + h * dv + col - DK];
      }
      slab[t * KS + e % KB] = x;
    }
    workgroupBarrier();
    for (var e = lid; e < C * KB; e += WG) {
      let t = e / KB;
      let cc = e % KB;
      var x = slab[t * KS + cc];
      for (var j = 0u; j < t; j++) { x = fma(tm[j * C + t], slab[j * KS + cc], x); }
      if (c0 + cc < nb) { wu[wbase + t * nb + c0 + cc] = x; }
    }
    workgroupBarrier();
  }
}

// Matmul for few rows (decode, batched decode, verify; M ≤ ~16), bandwidth-bound: each weight is read once
// for all M rows. 4-bit weights take matmul_vec_q4.wgsl (f32 x) or matmul_vec_q4x8.wgsl (int8 x).
//   y[row0 + m, n_off + n] (=|+=) Σ_k x̂[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
//   x̂ = x, or with NORM the row's RMSNorm x·rsqrt(mean(x²) + eps)·gamma, fused into the x loads (decode
//   rows skip a separate norm dispatch: Σx² is summed alongside the dot and applied once per output).
//
// Weight formats (define): Q8       MLX affine 8-bit, 32-value units read as 2 vec4<u32>
//                          QGEN     MLX affine with any BITS (2/3/5/6): bit-stream rows, values may
//                                   straddle words
//                          WF16, WBF16  16-bit floats, 8-value units read as one vec4<u32>
//   quantized: w = scale·q + bias per group of GS values along K (scales/biases 16-bit, SCALE_F16 or bf16);
//   computed as scale·Σ q·x + bias·Σ x per unit.
// Epilogue (define): OUT_F32 → y f32;  ADD → y f32 and y += result (the residual add);  else y act.
//                    BIAS → + bias[n] (f32).
// Bindings:  x      (rows, K) f32 (matmul inputs are f32: no f16→f32 conversions here)
//            w      (N, K·BITS/32) u32 | (N, K/2) u32
//            scales, biases (N, K/GS) 16-bit packed in u32 (quantized formats)
//            bias   (N) f32 (BIAS)
//            gamma  (K) f32 (NORM: the RMSNorm weight)
//            y      (rows, ldy) act | f32
// Grid: ceil(N / (R·WG/T)) workgroups, folded 2-D. A team of T lanes (a power of two ≤ the subgroup size)
// computes R adjacent columns for all M rows: lane t takes K-units t, t+T, ..., loading the R weight units
// together (bytes in flight) and each x chunk once for all R columns; then the team sums its lanes in a fixed
// order, by shuffles (TEAM_SUBGROUP) or a workgroup-memory tree. Rows go in blocks of MB (1 or 4); row m's
// arithmetic never depends on M (batch invariance).
#include "lib/common.wgsl"
#include "lib/matmul_vec.wgsl"
#include "lib/matmul.wgsl"

const R: u32 = {{COLUMNS_PER_TEAM}}u;    // columns per team
#ifdef QGEN
@group(0) @binding(2) var<storage, read> w: array<u32>;
#else
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
#endif
#ifndef WF16
#ifndef WBF16
#define QUANT
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;
#endif
#endif

#ifndef TEAM_SUBGROUP
var<workgroup> tred: array<vec4<f32>, WG * R>;
var<workgroup> tss: array<vec4<f32>, WG>;
#endif

fn byte4(wd: u32) -> vec4<f32> {
  return vec4<f32>(vec4<u32>(wd, wd >> 8u, wd >> 16u, wd >> 24u) & vec4<u32>(255u));
}
fn half4(a: u32, b: u32) -> vec4<f32> {
#ifdef WF16
  return vec4<f32>(unpack2x16float(a), unpack2x16float(b));
#else
  return vec4<f32>(bf16_lo(a), bf16_hi(a), bf16_lo(b), bf16_hi(b));
#endif
}

#ifdef QUANT
// Σ q·x over one 32-value unit; xv holds the unit's x values (8 vec4).
fn unit_dot(wq: array<u32, 8>, xv: array<vec4<f32>, 8>) -> f32 {
#if Q8
  var d = 0.0;
  for (var c = 0u; c < 8u; c++) { d += dot(byte4(wq[c]), xv[c]); }
  return d;
#else
  var d = 0.0;
  for (var e = 0u; e < 32u; e++) {
    let bit = e * BITS;
    let sh = bit & 31u;
    var v = wq[bit >> 5u] >> sh;
    if (sh + BITS > 32u) { v = v | (wq[(bit >> 5u) + 1u] << (32u - sh)); }
    d += f32(v & ((1u << BITS) - 1u)) * xv[e / 4u][e % 4u];
  }
  return d;
#endif
}
#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let teams = WG / T;
  let team = lid / T;
  let lane = lid % T;
  let n0 = (wg_linear(wid, nwg) * teams + team) * R;   // first of the team's R columns
  let K = params.K;
  let K4 = K / 4u;
#ifdef QUANT
  let units = K / 32u;
  let gpr = K / GS;                // groups per row
#else
  let units = K / 8u;
#endif
  var nn: array<u32, R>;           // columns clamped in range (out-of-range ones are computed, never written)
  for (var c = 0u; c < R; c++) { nn[c] = min(n0 + c, params.N - 1u); }
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    var acc: array<vec4<f32>, R>;  // [column][row of the block]
    for (var c = 0u; c < R; c++) { acc[c] = vec4<f32>(0.0); }
    var ss = vec4<f32>(0.0);       // Σx² per row of the block (NORM)
    for (var u = lane; u < units; u += T) {
#ifdef QUANT
      var wq: array<array<u32, 8>, R>;
      var sb: array<vec2<f32>, R>;
      for (var c = 0u; c < R; c++) {
#ifdef QGEN
        for (var i = 0u; i < BITS; i++) { wq[c][i] = w[(nn[c] * units + u) * BITS + i]; }
#else
        let a = w[(nn[c] * units + u) * 2u];
        let b = w[(nn[c] * units + u) * 2u + 1u];
        wq[c] = array<u32, 8>(a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
#endif
        let gi = nn[c] * gpr + (u * 32u) / GS;
        sb[c] = vec2<f32>(half_at(scales[gi >> 1u], gi), half_at(biases[gi >> 1u], gi));
      }
      for (var j = 0u; j < MB; j++) {
        let xb = (params.row0 + min(m0 + j, params.M - 1u)) * K4 + u * 8u;
        var xv: array<vec4<f32>, 8>;
        var sx = vec4<f32>(0.0);
        for (var i = 0u; i < 8u; i++) {
          xv[i] = x[xb + i];
#ifdef NORM
          ss[j] += dot(xv[i], xv[i]);
          xv[i] *= gamma[u * 8u + i];
#endif
          sx += xv[i];
        }
        let sxs = sx.x + sx.y + sx.z + sx.w;
        for (var c = 0u; c < R; c++) {
          acc[c][j] += sb[c].x * unit_dot(wq[c], xv) + sb[c].y * sxs;
        }
      }
#else
      var wq: array<vec4<u32>, R>;
      for (var c = 0u; c < R; c++) { wq[c] = w[nn[c] * units + u]; }
      for (var j = 0u; j < MB; j++) {
        let xb = (params.row0 + min(m0 + j, params.M - 1u)) * K4 + u * 2u;
        var x0 = x[xb];
        var x1 = x[xb + 1u];
#ifdef NORM
        ss[j] += dot(x0, x0) + dot(x1, x1);
        x0 *= gamma[u * 2u];
        x1 *= gamma[u * 2u + 1u];
#endif
        for (var c = 0u; c < R; c++) {
          acc[c][j] += dot(half4(wq[c].x, wq[c].y), x0) + dot(half4(wq[c].z, wq[c].w), x1);
        }
      }
#endif
    }
    // Team reduction in a fixed order.
#ifdef TEAM_SUBGROUP
    for (var mask = T / 2u; mask > 0u; mask = mask >> 1u) {
      for (var c = 0u; c < R; c++) { acc[c] += subgroupShuffleXor(acc[c], mask); }
      ss += subgroupShuffleXor(ss, mask);
    }
#else
    for (var c = 0u; c < R; c++) { tred[lid * R + c] = acc[c]; }
    tss[lid] = ss;
    workgroupBarrier();
    for (var s2 = T / 2u; s2 > 0u; s2 = s2 >> 1u) {
      if (lane < s2) {
        for (var c = 0u; c < R; c++) { tred[lid * R + c] = tred[lid * R + c] + tred[(lid + s2) * R + c]; }
        tss[lid] = tss[lid] + tss[lid + s2];
      }
      workgroupBarrier();
    }
    for (var c = 0u; c < R; c++) { acc[c] = tred[team * T * R + c]; }
    ss = tss[team * T];
    workgroupBarrier();
#endif
    // Lane c of the team writes column c.
    if (lane < R && n0 + lane < params.N) {
      let n = n0 + lane;
      var out = vec4<f32>(0.0);
      for (var c = 0u; c < R; c++) { if (c == lane) { out = acc[c]; } }
      for (var j = 0u; j < MB; j++) {
        if (m0 + j >= params.M) { break; }
        store((params.row0 + m0 + j), n, out[j] * norm_factor(ss[j]));
      }
    }
  }
}

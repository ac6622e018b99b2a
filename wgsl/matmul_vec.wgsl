// Matmul for few rows (decode, batched decode, verify; M ≤ ~16), bandwidth-bound: each weight is read once
// for all M rows.
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
//
// Weight formats (define): Q4, Q8   MLX affine, 32-value units read as 1 or 2 vec4<u32>
//                          QGEN     MLX affine with any BITS (2/3/5/6): bit-stream rows, values may straddle words
//                          WF16, WBF16  16-bit floats, 8-value units read as one vec4<u32>
//   quantized: w = scale·q + bias per group of GS values along K (scales/biases 16-bit, SCALE_F16 or bf16)
// Epilogue (define): OUT_F32 → y f32;  ADD → y f32 and y += result (the residual add);  else y act.
//                    BIAS → + bias[n] (f32).
// Bindings:  x      (rows, K) act, read as vec4
//            w      (N, K·BITS/32) u32 | (N, K/2) u32
//            scales, biases (N, K/GS) 16-bit packed in u32 (quantized formats)
//            bias   (N) f32 (BIAS)
//            y      (rows, ldy) act | f32
// Grid: ceil(N / (WG/T)) workgroups, folded 2-D. A team of T lanes computes one column n for all M rows:
// lanes take K-units round-robin, then the team sums its lanes in a fixed tree. Rows go in blocks of MB
// so one weight load feeds MB rows; row m's arithmetic never depends on M (batch invariance).
#include "lib/common.wgsl"

override WG: u32 = 128;
override T: u32 = 32;       // lanes per output column, power of two dividing WG
override BITS: u32 = 4;
override GS: u32 = 64;
const MB: u32 = 4u;

struct Params {
  M: u32,      // rows
  N: u32,      // output columns held by this weight buffer
  K: u32,      // reduction length (elements)
  row0: u32,   // first row of x and y used (rows)
  ldy: u32,    // row stride of y (elements)
  n_off: u32,  // column of y where this weight's output starts (elements)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<act4>;
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
#ifdef BIAS
@group(0) @binding(5) var<storage, read> bias: array<f32>;
#endif
#ifdef OUT_F32
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
#elif ADD
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
#else
@group(0) @binding(6) var<storage, read_write> y: array<act>;
#endif

var<workgroup> tred: array<vec4<f32>, WG>;

fn half_at(word: u32, idx: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(word)[idx & 1u];
#else
  return select(bf16_lo(word), bf16_hi(word), (idx & 1u) == 1u);
#endif
}

fn nib4(wd: u32, sh: u32) -> vec4<f32> {
  return vec4<f32>(f32((wd >> sh) & 15u), f32((wd >> (sh + 4u)) & 15u),
                   f32((wd >> (sh + 8u)) & 15u), f32((wd >> (sh + 12u)) & 15u));
}
fn byte4(wd: u32) -> vec4<f32> {
  return vec4<f32>(f32(wd & 255u), f32((wd >> 8u) & 255u), f32((wd >> 16u) & 255u), f32(wd >> 24u));
}
fn f16x4(a: u32, b: u32) -> vec4<f32> {
#ifdef WF16
  return vec4<f32>(unpack2x16float(a), unpack2x16float(b));
#else
  return vec4<f32>(bf16_lo(a), bf16_hi(a), bf16_lo(b), bf16_hi(b));
#endif
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let teams = WG / T;
  let team = lid / T;
  let lane = lid % T;
  let n = wg_linear(wid, nwg) * teams + team;
  let nn = min(n, params.N - 1u);  // out-of-range teams compute a valid column and drop it
  let K = params.K;
  let K4 = K / 4u;                 // x row length in vec4
#ifdef QUANT
  let units = K / 32u;
  let gpr = K / GS;                // groups per row
#else
  let units = K / 8u;
#endif
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    var acc = vec4<f32>(0.0);
    // x rows of this block, clamped so loads stay in range; clamped rows are never written.
    var xr: array<u32, MB>;
    for (var j = 0u; j < MB; j++) { xr[j] = (params.row0 + min(m0 + j, params.M - 1u)) * K4; }
    for (var u = lane; u < units; u += T) {
#ifdef QUANT
      let gi = nn * gpr + (u * 32u) / GS;
      let s = half_at(scales[gi >> 1u], gi);
      let b = half_at(biases[gi >> 1u], gi);
#endif
#ifdef Q4
      let q = w[nn * units + u];                       // 32 nibbles
      for (var j = 0u; j < MB; j++) {
        let xb = xr[j] + u * 8u;
        var dq = 0.0;
        var sx = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
          let x0 = vec4<f32>(x[xb + 2u * c]);
          let x1 = vec4<f32>(x[xb + 2u * c + 1u]);
          dq += dot(nib4(q[c], 0u), x0) + dot(nib4(q[c], 16u), x1);
          sx += x0 + x1;
        }
        acc[j] += s * dq + b * (sx.x + sx.y + sx.z + sx.w);
      }
#elif Q8
      let q0 = w[(nn * units + u) * 2u];
      let q1 = w[(nn * units + u) * 2u + 1u];
      for (var j = 0u; j < MB; j++) {
        let xb = xr[j] + u * 8u;
        var dq = 0.0;
        var sx = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
          let x0 = vec4<f32>(x[xb + c]);
          let x1 = vec4<f32>(x[xb + 4u + c]);
          dq += dot(byte4(q0[c]), x0) + dot(byte4(q1[c]), x1);
          sx += x0 + x1;
        }
        acc[j] += s * dq + b * (sx.x + sx.y + sx.z + sx.w);
      }
#elif QGEN
      let wb = (nn * units + u) * BITS;                // a 32-value unit is exactly BITS words
      var qv: array<f32, 32>;
      for (var e = 0u; e < 32u; e++) {
        let bit = e * BITS;
        let sh = bit & 31u;
        var v = w[wb + (bit >> 5u)] >> sh;
        if (sh + BITS > 32u) { v = v | (w[wb + (bit >> 5u) + 1u] << (32u - sh)); }
        qv[e] = f32(v & ((1u << BITS) - 1u));
      }
      for (var j = 0u; j < MB; j++) {
        let xb = xr[j] + u * 8u;
        var dq = 0.0;
        var sx = vec4<f32>(0.0);
        for (var c = 0u; c < 8u; c++) {
          let xv = vec4<f32>(x[xb + c]);
          dq += dot(vec4<f32>(qv[4u * c], qv[4u * c + 1u], qv[4u * c + 2u], qv[4u * c + 3u]), xv);
          sx += xv;
        }
        acc[j] += s * dq + b * (sx.x + sx.y + sx.z + sx.w);
      }
#else
      let q = w[nn * units + u];                       // 8 16-bit floats
      let w0 = f16x4(q.x, q.y);
      let w1 = f16x4(q.z, q.w);
      for (var j = 0u; j < MB; j++) {
        let xb = xr[j] + u * 2u;
        acc[j] += dot(w0, vec4<f32>(x[xb])) + dot(w1, vec4<f32>(x[xb + 1u]));
      }
#endif
    }
    // Team reduction in a fixed tree.
    tred[lid] = acc;
    workgroupBarrier();
    for (var s2 = T / 2u; s2 > 0u; s2 = s2 >> 1u) {
      if (lane < s2) { tred[lid] = tred[lid] + tred[lid + s2]; }
      workgroupBarrier();
    }
    if (lane < MB && n < params.N && m0 + lane < params.M) {
      var v = tred[team * T][lane];
#ifdef BIAS
      v += bias[n];
#endif
      let yi = (params.row0 + m0 + lane) * params.ldy + params.n_off + n;
#ifdef ADD
      y[yi] = y[yi] + v;
#elif OUT_F32
      y[yi] = v;
#else
      y[yi] = act(v);
#endif
    }
    workgroupBarrier();
  }
}

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
// Bindings:  x      (rows, K) act
//            w      (N, K·BITS/32) u32 | (N, K/2) u32
//            scales, biases (N, K/GS) 16-bit packed in u32 (quantized formats)
//            bias   (N) f32 (BIAS)
//            y      (rows, ldy) act | f32
// Grid: ceil(N / (WG/T)) workgroups, folded 2-D. A team of T lanes computes one column n for all M rows:
// lane t takes K-units t, t+T, ... with U units in flight, then the team sums its lanes (subgroup shuffles
// when TEAM_SUBGROUP, else a workgroup-memory tree), in a fixed order. Rows go in blocks of MB (1 or 4) so
// one weight load feeds MB rows; row m's arithmetic never depends on M (batch invariance).
#include "lib/common.wgsl"

override WG: u32 = 128;
override T: u32 = 8;         // lanes per output column, power of two dividing WG (≤ subgroup size with TEAM_SUBGROUP)
override BITS: u32 = 4;
override GS: u32 = 64;
const MB: u32 = {{MB}}u;     // rows per block
const U: u32 = {{U}}u;       // units in flight per lane

struct Params {
  M: u32,      // rows
  N: u32,      // output columns held by this weight buffer
  K: u32,      // reduction length (elements)
  row0: u32,   // first row of x and y used (rows)
  ldy: u32,    // row stride of y (elements)
  n_off: u32,  // column of y where this weight's output starts (elements)
}
@group(0) @binding(0) var<uniform> params: Params;
#ifdef F16
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;   // 8 halves per load
#else
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
#endif
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

#ifndef TEAM_SUBGROUP
var<workgroup> tred: array<vec4<f32>, WG>;
#endif

fn half_at(word: u32, idx: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(word)[idx & 1u];
#else
  return select(bf16_lo(word), bf16_hi(word), (idx & 1u) == 1u);
#endif
}

// 8 consecutive x values starting at element e (e a multiple of 8) as two vec4<f32>.
fn x8(e: u32) -> array<vec4<f32>, 2> {
#ifdef F16
  let v = x[e / 8u];
  return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)),
                             vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));
#else
  return array<vec4<f32>, 2>(x[e / 4u], x[e / 4u + 1u]);
#endif
}

fn nib8(wd: u32) -> array<vec4<f32>, 2> {
  let lo = vec4<u32>(wd, wd >> 4u, wd >> 8u, wd >> 12u) & vec4<u32>(15u);
  let hi = vec4<u32>(wd >> 16u, wd >> 20u, wd >> 24u, wd >> 28u) & vec4<u32>(15u);
  return array<vec4<f32>, 2>(vec4<f32>(lo), vec4<f32>(hi));
}
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

// Q4 without int→float conversions: OR-ing the masked nibble k of a half-word into the mantissa of 2^23
// gives 2^23 + q·16^k exactly. Products are summed per nibble position and scaled by 16^-k once per unit.
fn magic4(h: u32) -> vec4<f32> {
  let v = (vec4<u32>(h) & vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u)) | vec4<u32>(0x4b000000u);
  return bitcast<vec4<f32>>(v) - vec4<f32>(8388608.0);
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
#ifdef QUANT
  let units = K / 32u;
  let gpr = K / GS;                // groups per row
#else
  let units = K / 8u;
#endif
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    var acc: array<f32, MB>;
    var xr: array<u32, MB>;        // element offset of each row of the block (clamped: never written)
    for (var j = 0u; j < MB; j++) {
      acc[j] = 0.0;
      xr[j] = (params.row0 + min(m0 + j, params.M - 1u)) * K;
    }
    for (var u0 = lane; u0 < units; u0 += T * U) {
      // Issue all U weight loads before using any of them: bytes in flight hide memory latency.
#ifdef QGEN
      var wq: array<array<u32, 8>, U>;
      for (var i = 0u; i < U; i++) {
        let u = min(u0 + i * T, units - 1u);
        for (var c = 0u; c < BITS; c++) { wq[i][c] = w[(nn * units + u) * BITS + c]; }
      }
#elif Q8
      var wq: array<array<vec4<u32>, 2>, U>;
      for (var i = 0u; i < U; i++) {
        let u = min(u0 + i * T, units - 1u);
        wq[i][0] = w[(nn * units + u) * 2u];
        wq[i][1] = w[(nn * units + u) * 2u + 1u];
      }
#else
      var wq: array<vec4<u32>, U>;
      for (var i = 0u; i < U; i++) { wq[i] = w[nn * units + min(u0 + i * T, units - 1u)]; }
#endif
      for (var i = 0u; i < U; i++) {
        let u = u0 + i * T;
        if (u >= units) { break; }
#ifdef QUANT
        let gi = nn * gpr + (u * 32u) / GS;
        let s = half_at(scales[gi >> 1u], gi);
        let b = half_at(biases[gi >> 1u], gi);
#if QMAGIC
        for (var j = 0u; j < MB; j++) {
          var pk = vec4<f32>(0.0);   // Σ q_k·16^k·x, by nibble position k within a half-word
          var sx = vec4<f32>(0.0);
          for (var c = 0u; c < 4u; c++) {
            let xv = x8(xr[j] + u * 32u + c * 8u);
            let wd = wq[i][c];
            pk = fma(magic4(wd & 0xffffu), xv[0], pk);
            pk = fma(magic4(wd >> 16u), xv[1], pk);
            sx += xv[0] + xv[1];
          }
          let dq = dot(pk, vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625));
          acc[j] += s * dq + b * (sx.x + sx.y + sx.z + sx.w);
        }
#else
        for (var j = 0u; j < MB; j++) {
          var dq = 0.0;
          var sx = vec4<f32>(0.0);
          for (var c = 0u; c < 4u; c++) {
            let xv = x8(xr[j] + u * 32u + c * 8u);
#ifdef Q4
            let q = nib8(wq[i][c]);
            dq += dot(q[0], xv[0]) + dot(q[1], xv[1]);
#elif Q8
            let wv = wq[i][c / 2u];
            dq += dot(byte4(wv[(c % 2u) * 2u]), xv[0]) + dot(byte4(wv[(c % 2u) * 2u + 1u]), xv[1]);
#else
            var qv: array<f32, 8>;
            for (var e = 0u; e < 8u; e++) {
              let bit = (c * 8u + e) * BITS;
              let sh = bit & 31u;
              var v = wq[i][bit >> 5u] >> sh;
              if (sh + BITS > 32u) { v = v | (wq[i][(bit >> 5u) + 1u] << (32u - sh)); }
              qv[e] = f32(v & ((1u << BITS) - 1u));
            }
            dq += dot(vec4<f32>(qv[0], qv[1], qv[2], qv[3]), xv[0]) + dot(vec4<f32>(qv[4], qv[5], qv[6], qv[7]), xv[1]);
#endif
            sx += xv[0] + xv[1];
          }
          acc[j] += s * dq + b * (sx.x + sx.y + sx.z + sx.w);
        }
#endif
#else
        let w0 = half4(wq[i].x, wq[i].y);
        let w1 = half4(wq[i].z, wq[i].w);
        for (var j = 0u; j < MB; j++) {
          let xv = x8(xr[j] + u * 8u);
          acc[j] += dot(w0, xv[0]) + dot(w1, xv[1]);
        }
#endif
      }
    }
    // Team reduction in a fixed order.
#ifdef TEAM_SUBGROUP
    for (var mask = T / 2u; mask > 0u; mask = mask >> 1u) {
      for (var j = 0u; j < MB; j++) { acc[j] += subgroupShuffleXor(acc[j], mask); }
    }
#else
    var packed = vec4<f32>(0.0);
    for (var j = 0u; j < MB; j++) { packed[j] = acc[j]; }
    tred[lid] = packed;
    workgroupBarrier();
    for (var s2 = T / 2u; s2 > 0u; s2 = s2 >> 1u) {
      if (lane < s2) { tred[lid] = tred[lid] + tred[lid + s2]; }
      workgroupBarrier();
    }
    let red = tred[team * T];
    for (var j = 0u; j < MB; j++) { acc[j] = red[j]; }
    workgroupBarrier();
#endif
    if (lane == 0u && n < params.N) {
      for (var j = 0u; j < MB; j++) {
        if (m0 + j >= params.M) { break; }
        var v = acc[j];
#ifdef BIAS
        v += bias[n];
#endif
        let yi = (params.row0 + m0 + j) * params.ldy + params.n_off + n;
#ifdef ADD
        y[yi] = y[yi] + v;
#elif OUT_F32
        y[yi] = v;
#else
        y[yi] = act(v);
#endif
      }
    }
  }
}

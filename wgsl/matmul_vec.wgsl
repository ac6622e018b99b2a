// Matmul for few rows (decode, batched decode, verify; M ≤ ~16), bandwidth-bound: each weight is read once
// for all M rows.
//   y[row0 + m, n_off + n] (=|+=) Σ_k x[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
//
// Weight formats (define): Q4, Q8   MLX affine, 32-value units read as 1 or 2 vec4<u32>
//                          QGEN     MLX affine with any BITS (2/3/5/6): bit-stream rows, values may straddle words
//                          WF16, WBF16  16-bit floats, 8-value units read as one vec4<u32>
//   quantized: w = scale·q + bias per group of GS values along K (scales/biases 16-bit, SCALE_F16 or bf16);
//   computed as scale·Σ q·x + bias·Σ x per unit. Q4 with QMAGIC avoids int→float conversions (slow on GPUs):
//   OR-ing nibble k of a half-word into the mantissa of 2^23 gives 2^23 + q·16^k exactly.
// Epilogue (define): OUT_F32 → y f32;  ADD → y f32 and y += result (the residual add);  else y act.
//                    BIAS → + bias[n] (f32).
// Bindings:  x      (rows, K) f32 (matmul inputs are f32: no f16→f32 conversions here)
//            w      (N, K·BITS/32) u32 | (N, K/2) u32
//            scales, biases (N, K/GS) 16-bit packed in u32 (quantized formats)
//            bias   (N) f32 (BIAS)
//            y      (rows, ldy) act | f32
// Grid: ceil(N / (R·WG/T)) workgroups, folded 2-D. A team of T lanes computes R adjacent columns for all M
// rows: lane t takes K-units t, t+T, ..., loading the R weight units together (bytes in flight) and each x
// chunk once for all R columns; then the team sums its lanes (subgroup shuffles with TEAM_SUBGROUP, else a
// workgroup-memory tree) in a fixed order. Rows go in blocks of MB (1 or 4); row m's arithmetic never
// depends on M (batch invariance).
#include "lib/common.wgsl"

override WG: u32 = 128;
override T: u32 = 8;         // lanes per team, power of two dividing WG (≤ subgroup size with TEAM_SUBGROUP)
override BITS: u32 = 4;
override GS: u32 = 64;
const MB: u32 = {{MB}}u;     // rows per block (≤ 4: rows are the components of a vec4 accumulator)
const R: u32 = {{R}}u;       // columns per team

struct Params {
  M: u32,      // rows
  N: u32,      // output columns held by this weight buffer
  K: u32,      // reduction length (elements)
  row0: u32,   // first row of x and y used (rows)
  ldy: u32,    // row stride of y (elements)
  n_off: u32,  // column of y where this weight's output starts (elements)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
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

// y[row, n_off + n] (=|+=) v (+ bias[n]): the epilogue shared by every path.
fn store(row: u32, n: u32, v0: f32) {
  var v = v0;
#ifdef BIAS
  v += bias[n];
#endif
  let yi = row * params.ldy + params.n_off + n;
#ifdef ADD
  y[yi] = y[yi] + v;
#elif OUT_F32
  y[yi] = v;
#else
  y[yi] = act(v);
#endif
}

#ifndef TEAM_SUBGROUP
var<workgroup> tred: array<vec4<f32>, WG * R>;
#endif

fn half_at(word: u32, idx: u32) -> f32 {
#ifdef SCALE_F16
  return unpack2x16float(word)[idx & 1u];
#else
  return select(bf16_lo(word), bf16_hi(word), (idx & 1u) == 1u);
#endif
}

fn byte4(wd: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(wd, wd >> 8u, wd >> 16u, wd >> 24u) & vec4<u32>(255u)); }
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
#if Q4
#if QMAGIC
  var pk = vec4<f32>(0.0);   // by nibble position within a half-word; scaled by 16^-k at the end
  for (var c = 0u; c < 4u; c++) {
    pk = fma(magic4(wq[c] & 0xffffu), xv[2u * c], pk);
    pk = fma(magic4(wq[c] >> 16u), xv[2u * c + 1u], pk);
  }
  return dot(pk, vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625));
#else
  var d = 0.0;
  for (var c = 0u; c < 4u; c++) { d += dot(nib8lo(wq[c]), xv[2u * c]) + dot(nib8hi(wq[c]), xv[2u * c + 1u]); }
  return d;
#endif
#elif Q8
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

#include "lib/q4.wgsl"

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

#if Q4R4
  // Single-row fast path: each lane takes 4 adjacent columns for its units, so every x value loaded from
  // L1 feeds 4 weight units (x traffic would otherwise be 8× the weight traffic), and 64 B of weights are
  // in flight per lane.
  let nb = n0 * 4u;
  let c0 = min(nb, params.N - 1u);
  let c1 = min(nb + 1u, params.N - 1u);
  let c2 = min(nb + 2u, params.N - 1u);
  let c3 = min(nb + 3u, params.N - 1u);
  let xr = params.row0 * K4;
  var acc = vec4<f32>(0.0);
  // The next unit's weights are fetched before this one is used (software pipelining: loads in flight).
  let uf = min(lane, units - 1u);
  var q0 = w[c0 * units + uf];
  var q1 = w[c1 * units + uf];
  var q2 = w[c2 * units + uf];
  var q3 = w[c3 * units + uf];
  for (var u = lane; u < units; u += T) {
    let un = min(u + T, units - 1u);
    let n0q = w[c0 * units + un];
    let n1q = w[c1 * units + un];
    let n2q = w[c2 * units + un];
    let n3q = w[c3 * units + un];
    let s0 = scale_bias(c0, u, gpr);
    let s1 = scale_bias(c1, u, gpr);
    let s2 = scale_bias(c2, u, gpr);
    let s3 = scale_bias(c3, u, gpr);
    let xb = xr + u * 8u;
    let x0 = x[xb];
    let x1 = x[xb + 1u];
    let x2 = x[xb + 2u];
    let x3 = x[xb + 3u];
    let x4 = x[xb + 4u];
    let x5 = x[xb + 5u];
    let x6 = x[xb + 6u];
    let x7 = x[xb + 7u];
    let sv = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    let sx = sv.x + sv.y + sv.z + sv.w;
    acc += vec4<f32>(s0.x, s1.x, s2.x, s3.x) * vec4<f32>(q4dot8(q0, x0, x1, x2, x3, x4, x5, x6, x7),
                                                          q4dot8(q1, x0, x1, x2, x3, x4, x5, x6, x7),
                                                          q4dot8(q2, x0, x1, x2, x3, x4, x5, x6, x7),
                                                          q4dot8(q3, x0, x1, x2, x3, x4, x5, x6, x7)) +
           vec4<f32>(s0.y, s1.y, s2.y, s3.y) * sx;
    q0 = n0q;
    q1 = n1q;
    q2 = n2q;
    q3 = n3q;
  }
#ifdef TEAM_SUBGROUP
  for (var mask = T / 2u; mask > 0u; mask = mask >> 1u) { acc += subgroupShuffleXor(acc, mask); }
#else
  tred[lid] = acc;
  workgroupBarrier();
  for (var st = T / 2u; st > 0u; st = st >> 1u) {
    if (lane < st) { tred[lid] = tred[lid] + tred[lid + st]; }
    workgroupBarrier();
  }
  acc = tred[team * T];
#endif
  if (lane < 4u && nb + lane < params.N) {
    let n = nb + lane;
    store(params.row0, n, acc[lane]);
  }
#elif Q4
  // Fast path: one column per team (R = 1), two units in flight per lane, MB rows as vec4 components.
  let n = n0;
  let nc = min(n, params.N - 1u);
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    let r0 = (params.row0 + m0) * K4;
#if MB4
    let r1 = (params.row0 + min(m0 + 1u, params.M - 1u)) * K4;
    let r2 = (params.row0 + min(m0 + 2u, params.M - 1u)) * K4;
    let r3 = (params.row0 + min(m0 + 3u, params.M - 1u)) * K4;
#endif
    var acc = vec4<f32>(0.0);
    for (var u = lane; u < units; u += 2u * T) {
      let u2 = u + T;
      let ok2 = u2 < units;
      let ub = select(u, u2, ok2);
      let qa = w[nc * units + u];
      let qb = w[nc * units + ub];
      let sa = scale_bias(nc, u, gpr);
      let sb = select(vec2<f32>(0.0), scale_bias(nc, ub, gpr), ok2);
      var d = q4dot(qa, r0 + u * 8u);
      var e = q4dot(qb, r0 + ub * 8u);
      // Unit by unit, in the order the single-row (Q4R4) path adds them: a row's bits must not depend on M.
      acc.x += sa.x * d.x + sa.y * d.y;
      acc.x += sb.x * e.x + sb.y * e.y;
#if MB4
      d = q4dot(qa, r1 + u * 8u);
      e = q4dot(qb, r1 + ub * 8u);
      acc.y += sa.x * d.x + sa.y * d.y;
      acc.y += sb.x * e.x + sb.y * e.y;
      d = q4dot(qa, r2 + u * 8u);
      e = q4dot(qb, r2 + ub * 8u);
      acc.z += sa.x * d.x + sa.y * d.y;
      acc.z += sb.x * e.x + sb.y * e.y;
      d = q4dot(qa, r3 + u * 8u);
      e = q4dot(qb, r3 + ub * 8u);
      acc.w += sa.x * d.x + sa.y * d.y;
      acc.w += sb.x * e.x + sb.y * e.y;
#endif
    }
#ifdef TEAM_SUBGROUP
    for (var mask = T / 2u; mask > 0u; mask = mask >> 1u) { acc += subgroupShuffleXor(acc, mask); }
#else
    tred[lid] = acc;
    workgroupBarrier();
    for (var s2 = T / 2u; s2 > 0u; s2 = s2 >> 1u) {
      if (lane < s2) { tred[lid] = tred[lid] + tred[lid + s2]; }
      workgroupBarrier();
    }
    acc = tred[team * T];
    workgroupBarrier();
#endif
    if (lane == 0u && n < params.N) {
      for (var j = 0u; j < MB; j++) {
        if (m0 + j >= params.M) { break; }
        store((params.row0 + m0 + j), n, acc[j]);
      }
    }
  }
#else
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    var acc: array<vec4<f32>, R>;  // [column][row of the block]
    for (var c = 0u; c < R; c++) { acc[c] = vec4<f32>(0.0); }
    for (var u = lane; u < units; u += T) {
#ifdef QUANT
      var wq: array<array<u32, 8>, R>;
      var sb: array<vec2<f32>, R>;
      for (var c = 0u; c < R; c++) {
#ifdef QGEN
        for (var i = 0u; i < BITS; i++) { wq[c][i] = w[(nn[c] * units + u) * BITS + i]; }
#elif Q8
        let a = w[(nn[c] * units + u) * 2u];
        let b = w[(nn[c] * units + u) * 2u + 1u];
        wq[c] = array<u32, 8>(a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w);
#else
        let a = w[nn[c] * units + u];
        wq[c] = array<u32, 8>(a.x, a.y, a.z, a.w, 0u, 0u, 0u, 0u);
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
        let x0 = x[xb];
        let x1 = x[xb + 1u];
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
    }
#else
    for (var c = 0u; c < R; c++) { tred[lid * R + c] = acc[c]; }
    workgroupBarrier();
    for (var s2 = T / 2u; s2 > 0u; s2 = s2 >> 1u) {
      if (lane < s2) {
        for (var c = 0u; c < R; c++) { tred[lid * R + c] = tred[lid * R + c] + tred[(lid + s2) * R + c]; }
      }
      workgroupBarrier();
    }
    for (var c = 0u; c < R; c++) { acc[c] = tred[team * T * R + c]; }
    workgroupBarrier();
#endif
    // Lane c of the team writes column c.
    if (lane < R && n0 + lane < params.N) {
      let n = n0 + lane;
      var out = vec4<f32>(0.0);
      for (var c = 0u; c < R; c++) { if (c == lane) { out = acc[c]; } }
      for (var j = 0u; j < MB; j++) {
        if (m0 + j >= params.M) { break; }
        store((params.row0 + m0 + j), n, out[j]);
      }
    }
  }
#endif
}

// Matmul for few rows (decode) of MLX affine 4-bit weights with int8 x, on integer dot products (as
// matmul_vec.wgsl: same bindings, params, epilogues and fused norm; SWIGLU as matmul_vec_q4.wgsl). Decode
// GEMVs are limited by their x traffic and dequant math, not by the weight bytes: f32 x is 8 bytes of x per
// byte of 4-bit weight, and each nibble costs a conversion and an FMA. Here each workgroup first quantizes
// the rows of x it needs into workgroup memory, and the dot products run on integers, four per dot4I8Packed.
//   prologue, per row: x̂ = x, or with NORM x·gamma (the row's rsqrt(mean(x²) + eps) then scales the result),
//     quantized per 32 values by lib/x8.wgsl (int8 q, sx, Σx̂).
//   main loop: a team of T lanes (≤ one subgroup) computes 4 adjacent columns (SWIGLU: gates j, j+1 and their
//     up rows); lane t takes chunks t, t+T, ... of 32 values (one vec4 of weights per column) and adds
//     scale·(sx·Σ q_w·q_x) + bias·Σx̂ per column; the team sums its lanes by shuffles in a fixed order.
// Bindings:  x (rows, K) f32;  w (N, K/32) vec4<u32>;  scales, biases (N, K/GS) 16-bit packed in u32
//            (SCALE_F16 or bf16);  bias (N) f32 (BIAS);  gamma (K) f32 (NORM);  y (rows, ldy) act | f32
// Grid: ceil(N / (4·WG/T)) workgroups, folded 2-D; rows in blocks of MB (1, or 4 where their int8 x fits).
// A row's bits depend on the row only (K, the device and the shape), never on M or the other rows.
// Workgroup memory: MB rows × K bytes of int8 x, MB × K/32 (sx, Σx̂) pairs, MB × WG/SGS partial Σx².
#include "lib/common.wgsl"
#include "lib/matmul_vec.wgsl"
#include "lib/matmul.wgsl"
#include "lib/x8.wgsl"

override SGS: u32 = 32;      // subgroup size (fixed on the devices that take this path)
const XW: u32 = {{INT8_X_VEC4S}}u;   // vec4<u32> of int8 x per row: K / 16
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;
var<workgroup> xq: array<vec4<u32>, XW * MB>;
var<workgroup> xs: array<vec2<f32>, (XW / 2u) * MB>;
var<workgroup> red: array<f32, MB * (WG / SGS)>;
#include "lib/x8_vec.wgsl"

// Quantizes rows m0 .. m0+MB−1 of x (clamped to M) into xq / xs; with NORM, x·gamma is quantized (the row's
// norm factor multiplies the result instead: quantization per group does not depend on a row-wide scale) and
// each subgroup's Σx² goes to red[j·WG/SGS + subgroup]. Every lane runs every loop the same number of times
// (shuffles in uniform control flow); lanes past the row's words compute on clamped data and drop it.
fn x8_prepare(m0: u32, lid: u32) {
  let K4 = params.K / 4u;
  for (var j = 0u; j < MB; j++) {
    var ss = x8_row(j, (params.row0 + min(m0 + j, params.M - 1u)) * K4, lid);
#ifdef NORM
    ss = subgroupAdd(ss);
    if (lid % SGS == 0u) { red[j * (WG / SGS) + lid / SGS] = ss; }
#endif
  }
  workgroupBarrier();
}

// Row j's norm factor from the subgroups' Σx² (in order), else 1. After x8_prepare's barrier.
fn x8_factor(j: u32) -> f32 {
#ifdef NORM
  var t = 0.0;
  for (var i = 0u; i < WG / SGS; i++) { t += red[j * (WG / SGS) + i]; }
  return norm_factor(t);
#else
  return 1.0;
#endif
}

fn x8_stage(cs: vec4<u32>, ci: u32, cpr: u32, gpr: u32) -> X8Stage {
  let gi = cs * gpr + vec4<u32>((ci * 32u) / GS);
  let h = gi >> vec4<u32>(1u);
  return X8Stage(w[cs.x * cpr + ci], w[cs.y * cpr + ci], w[cs.z * cpr + ci], w[cs.w * cpr + ci],
                 vec4<u32>(scales[h.x], scales[h.y], scales[h.z], scales[h.w]),
                 vec4<u32>(biases[h.x], biases[h.y], biases[h.z], biases[h.w]), gi);
}

fn x8_team(tid: u32, lane: u32, lid: u32) {
  let cpr = params.K / 32u;          // chunks per row
  let gpr = params.K / GS;
  let nb = tid * 4u;
#ifdef SWIGLU
  let I = params.N / 2u;
  let c0 = min(tid * 2u, I - 1u);
  let c2 = min(tid * 2u + 1u, I - 1u);
  let cs = vec4<u32>(c0, c0 + I, c2, c2 + I);
#else
  let cs = min(vec4<u32>(nb) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(params.N - 1u));
#endif
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    // The first chunk's weights are requested before the prologue, whose latency they then overlap; the
    // loop keeps one chunk in flight.
    var cur = x8_stage(cs, min(lane, cpr - 1u), cpr, gpr);
    x8_prepare(m0, lid);
    var acc: array<vec4<f32>, MB>;
    for (var j = 0u; j < MB; j++) { acc[j] = vec4<f32>(0.0); }
    for (var ci = lane; ci < cpr; ci += T) {
      let nxt = x8_stage(cs, min(ci + T, cpr - 1u), cpr, gpr);
      let sc = vec4<f32>(half_at(cur.sw.x, cur.gi.x), half_at(cur.sw.y, cur.gi.y),
                         half_at(cur.sw.z, cur.gi.z), half_at(cur.sw.w, cur.gi.w));
      let bi = vec4<f32>(half_at(cur.bw.x, cur.gi.x), half_at(cur.bw.y, cur.gi.y),
                         half_at(cur.bw.z, cur.gi.z), half_at(cur.bw.w, cur.gi.w));
      for (var j = 0u; j < MB; j++) {
        let xa = xq[j * XW + 2u * ci];
        let xb = xq[j * XW + 2u * ci + 1u];
        let s = xs[j * (XW / 2u) + ci];
        let d = vec4<f32>(vec4<i32>(idot(cur.q0, xa, xb), idot(cur.q1, xa, xb), idot(cur.q2, xa, xb),
                                    idot(cur.q3, xa, xb)));
        acc[j] += sc * (s.x * d) + bi * s.y;
      }
      cur = nxt;
    }
    for (var j = 0u; j < MB; j++) {
      var t = acc[j];
      for (var mask = T / 2u; mask > 0u; mask = mask >> 1u) { t += subgroupShuffleXor(t, mask); }
      t *= x8_factor(j);
#ifdef SWIGLU
      if (lane < 2u && tid * 2u + lane < I && m0 + j < params.M) {
        y[(params.row0 + m0 + j) * params.ldy + params.n_off + tid * 2u + lane] =
          silu(t[2u * lane]) * t[2u * lane + 1u];
      }
#else
      if (lane < 4u && nb + lane < params.N && m0 + j < params.M) {
        store(params.row0 + m0 + j, nb + lane, t[lane]);
      }
#endif
    }
    workgroupBarrier();   // xq is rewritten for the next block of rows
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let teams = WG / T;
  let team = lid / T;
  let lane = lid % T;
  x8_team(wg_linear(wid, nwg) * teams + team, lane, lid);
}

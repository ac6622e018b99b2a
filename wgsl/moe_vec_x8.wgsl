// Expert matmul for decode rows (moe_vec.wgsl's "vec" mode) of MLX affine 4-bit experts on int8 x, on
// integer dot products (as matmul_vec_q4x8.wgsl does for dense weights): the same bindings, params, grids,
// pair blocks, fusions (NORM, COMBINE, SHARED) and results as moe_vec.wgsl's Q4, except that x is quantized.
//   GATE_UP: h[p, i] = silu(x̂_r·W_e[i]) · (x̂_r·W_e[I + i])    W_e (2I, K), r = p / k, e = ids[p], i < I
//   else:    y[p, n] = h_p · W_e[n]                            W_e (N, K), x holds h (one row per pair)
//   COMBINE: xr[r, n] += Σ_{j < k, in order} weights[r, j] · (h_{r·k+j} · W_{ids[r·k+j]}[n])
//            (+ sigmoid(gate[r]) · sy[r, n] under SHARED), moe_combine.wgsl's arithmetic and order.
// x rows (gate_up: the pairs' step rows; down: h of the pairs) are quantized per 32 values by lib/x8.wgsl
// (int8 q, sx, Σx), exactly as the dense int8-x kernels do (src/lab/ref/matmul.ts quantizeX8); under NORM
// x·gamma is quantized and the row's factor rsqrt(mean(x²) + eps) scales the team's sums afterwards (the
// quantization per group does not depend on a row-wide scale), as matmul_vec_q4x8.wgsl's NORM.
// Per 32-value chunk and weight row: scale·(sx·Σ q_w·q_x) + bias·Σx, four products per dot4I8Packed.
// Bindings:  x      (rows, K) f32 (GATE_UP: the step's rows, raw residual under NORM; else (pairs, K): h)
//            w      (count·N, K/32) vec4<u32>: expert e's row n is stack row (e − e0)·N + n
//            scales, biases (count·N, K/GS) 16-bit packed in u32 (SCALE_F16 or bf16)
//            ids    (pairs) u32;  y (pairs, cols) f32 (not under COMBINE);  gamma (K) f32 (NORM)
//            xr (rows, N) f32, weights (rows, k) f32; sy (rows, N) f32, gate (rows) f32 (SHARED) (COMBINE)
// Grid: (ceil(cols / (CT·WG/T)), pairs), as moe_vec.wgsl: workgroup y serves the expert of pair y if no
// earlier pair has it, all its pairs in blocks of up to 4 rows; each block's rows are quantized into
// workgroup memory first (XR = 4 rows), then a team of T lanes (≤ a subgroup; sums by shuffles) computes 4
// weight rows (GATE_UP: gates j, j+1 and their up rows, CT = 2; else 4 adjacent columns, CT = 4), lane t
// taking chunks t, t+T, ... of 32 values.
// COMBINE grid: (ceil(N / CB), M): workgroup (x, y) serves columns x·CB .. x·CB + CB − 1 of row row0 + y; it
// quantizes the row's k pair rows of h (XR = k), then its teams take the items (pair j, 4 columns) j-major.
// A pair's bits are the same whichever slot or block it takes, under COMBINE or not (for the same T and K),
// and never depend on M or the other rows.
// ROUTE (GATE_UP, one decode row, one shard): no ids in; each workgroup picks the row's experts from its
// router logits itself (lib/topk.wgsl with subgroups, moe_route.wgsl's defines) and serves pair y;
// workgroup (0, 0) writes ids and weights (rows, k) for down. One dispatch less a layer; the bits of
// moe_route.wgsl then this kernel.
// Bindings (ROUTE): logits (rows, E) f32; ids (rows, k) u32, weights (rows, k) f32 written.
// Params, bindings and the pieces shared with moe_vec.wgsl (team rows, pair blocks, stores, COMBINE's
// load and sum): lib/moe_vec.wgsl.
#include "lib/common.wgsl"
#include "lib/moe.wgsl"
#include "lib/x8.wgsl"

override WG: u32 = 128;
override T: u32 = 8;        // lanes per team: a power of two, at most the subgroup size
override SGS: u32 = 32;     // subgroup size (fixed on the devices that take this path)
const XW: u32 = {{INT8_X_VEC4S}}u;   // vec4<u32> of int8 x per row: K / 16
const XR: u32 = {{X8_ROWS}}u;        // rows of int8 x in workgroup memory

#ifdef COMBINE
override CB: u32 = 16;      // columns per workgroup: a multiple of CT, at most WG
#endif
// After the overrides its declarations use (T, WG, CB).
#include "lib/moe_vec.wgsl"
#ifdef NORM
var<workgroup> red: array<f32, 4u * (WG / SGS)>;   // [slot][subgroup]: partial Σx²
#endif
var<workgroup> xq: array<vec4<u32>, XW * XR>;       // [slot][K / 16]: int8 x
var<workgroup> xs: array<vec2<f32>, (XW / 2u) * XR>; // [slot][K / 32]: (sx, Σx) per chunk

#include "lib/x8_vec.wgsl"
#ifdef ROUTE
#define TOPK_SUBGROUPS
const MAX_E: u32 = 512u;
const MAX_K: u32 = 16u;
#include "lib/topk.wgsl"
var<workgroup> routed: u32;   // the workgroup's expert, loaded uniformly
#endif

fn x8_stage(rows: vec4<u32>, ci: u32, cpr: u32) -> X8Stage {
  let gi = rows * (params.K / GS) + vec4<u32>((ci * 32u) / GS);
  let h = gi >> vec4<u32>(1u);
  return X8Stage(w[rows.x * cpr + ci], w[rows.y * cpr + ci], w[rows.z * cpr + ci], w[rows.w * cpr + ci],
                 vec4<u32>(scales[h.x], scales[h.y], scales[h.z], scales[h.w]),
                 vec4<u32>(biases[h.x], biases[h.y], biases[h.z], biases[h.w]), gi);
}

// The chunk's scales (.sc) and biases (.bi) of the 4 rows.
struct ScaleBias { sc: vec4<f32>, bi: vec4<f32> }

fn scale_bias(s: X8Stage) -> ScaleBias {
  let sc = vec4<f32>(half_at(s.sw.x, s.gi.x), half_at(s.sw.y, s.gi.y), half_at(s.sw.z, s.gi.z),
                     half_at(s.sw.w, s.gi.w));
  let bi = vec4<f32>(half_at(s.bw.x, s.gi.x), half_at(s.bw.y, s.gi.y), half_at(s.bw.z, s.gi.z),
                     half_at(s.bw.w, s.gi.w));
  return ScaleBias(sc, bi);
}

// Chunk ci's contribution to the 4 rows' dots against slot j's int8 x: scale·(sx·Σ q_w·q_x) + bias·Σx.
fn chunk_dot(s: X8Stage, f: ScaleBias, j: u32, ci: u32) -> vec4<f32> {
  let xa = xq[j * XW + 2u * ci];
  let xb = xq[j * XW + 2u * ci + 1u];
  let v = xs[j * (XW / 2u) + ci];
  let d = vec4<f32>(vec4<i32>(idot(s.q0, xa, xb), idot(s.q1, xa, xb), idot(s.q2, xa, xb),
                              idot(s.q3, xa, xb)));
  return f.sc * (v.x * d) + f.bi * v.y;
}

// Sum over the team's T lanes by shuffles in a fixed order; every lane of the team ends with the same bits.
fn team_sum(v: vec4<f32>) -> vec4<f32> {
  var s = v;
  for (var mask = T / 2u; mask > 0u; mask = mask >> 1u) { s += subgroupShuffleXor(s, mask); }
  return s;
}

#ifdef COMBINE
// x8_row's quantization of `words` consecutive words from vec4 xb into slots 0, 1, ... (a row's k pair rows
// are consecutive and groups never straddle rows: the bits of one x8_row per slot), two words a lane loaded
// before either is used, so the rows' load latencies overlap.
fn x8_span(xb: u32, words: u32, lid: u32) {
  for (var w0 = 0u; w0 < words; w0 += 2u * WG) {
    let i = vec2<u32>(w0 + lid, w0 + WG + lid);
    let c = min(i, vec2<u32>(words - 1u));
    let g0 = x8_group(x[xb + 2u * c.x], x[xb + 2u * c.x + 1u]);
    let g1 = x8_group(x[xb + 2u * c.y], x[xb + 2u * c.y + 1u]);
    x8_store(i.x < words, c.x, g0);
    x8_store(i.y < words, c.y, g1);
  }
}
#endif
#ifndef COMBINE
// Slot j's norm factor from its subgroups' Σx² (in order), else 1. After the block's barrier.
fn factor(j: u32) -> f32 {
#ifdef NORM
  var t = 0.0;
  for (var i = 0u; i < WG / SGS; i++) { t += red[j * (WG / SGS) + i]; }
  return inverseSqrt(t / f32(params.K) + params.eps);
#else
  return 1.0;
#endif
}

// The block's n rows of x (from vec4s xb) into slots 0 .. n − 1, with their subgroups' Σx² under NORM.
fn quantize_block(xb: vec4<u32>, n: u32, lid: u32) {
  for (var j = 0u; j < n; j++) {
#ifdef NORM
    let t = subgroupAdd(x8_row(j, xb[j], lid));
    if (lid % SGS == 0u) { red[j * (WG / SGS) + lid / SGS] = t; }
#else
    _ = x8_row(j, xb[j], lid);
#endif
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let q0 = wid.y;
#ifdef ROUTE
  // One decode row (P0 = row·k): every workgroup routes it (moe_route.wgsl's code and defines: same bits);
  // workgroup (0, 0) stores the ids and weights for the down kernel. e only addresses weights.
  let r = params.P0 / params.pairs;
#ifndef TOPK_ONE_SUBGROUP
  for (var i = lid; i < params.E; i += WG) { tk_p[i] = logits[r * params.E + i]; }
  workgroupBarrier();
#endif
  let pick = route_row(r, params.E, params.pairs, params.renorm != 0u, lid, wid.x == 0u && q0 == 0u, q0);
  if (lid == 0u) { routed = pick; }
  let e = workgroupUniformLoad(&routed);
#else
  let e = ids[params.P0 + q0];
#endif
  // ids is read-only, so values read at uniform indices are uniform: the exits, the blocks and their
  // quantization below are the same for the whole workgroup (barriers and shuffles stay legal).
  if (!serves(e, q0)) { return; }
  let team = lid / T;
  let lane = lid % T;
  let tid = wid.x * (WG / T) + team;
  let rows = team_rows(tid, (e - params.e0) * params.N);
  let cpr = params.K / 32u;   // chunks per row
  var q = q0;
  loop {
    let b = next_block(e, &q);
    let blk = b.p;
    let n = b.n;
    if (n == 0u) { break; }
    let xb = (blk / vec4<u32>(params.kdiv)) * (params.K / 4u);
    // The first chunk's weights are requested before the quantization, whose latency they overlap.
    var cur = x8_stage(rows, min(lane, cpr - 1u), cpr);
    quantize_block(xb, n, lid);
    workgroupBarrier();
    // Slot by slot, the same code whatever n is: a pair's bits never depend on the other pairs.
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    for (var ci = lane; ci < cpr; ci += T) {
      let nxt = x8_stage(rows, min(ci + T, cpr - 1u), cpr);
      let f = scale_bias(cur);
      a0 += chunk_dot(cur, f, 0u, ci);
      if (n > 1u) { a1 += chunk_dot(cur, f, 1u, ci); }
      if (n > 2u) { a2 += chunk_dot(cur, f, 2u, ci); }
      if (n > 3u) { a3 += chunk_dot(cur, f, 3u, ci); }
      cur = nxt;
    }
    store_pair(blk.x, tid, lane, team_sum(a0), factor(0u));
    if (n > 1u) { store_pair(blk.y, tid, lane, team_sum(a1), factor(1u)); }
    if (n > 2u) { store_pair(blk.z, tid, lane, team_sum(a2), factor(2u)); }
    if (n > 3u) { store_pair(blk.w, tid, lane, team_sum(a3), factor(3u)); }
    workgroupBarrier();   // xq, xs and red are rewritten for the next block
  }
}
#else
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.y;
  let k = params.k;
  let team = lid / T;
  let lane = lid % T;
  let groups = CB / CT;       // column groups per workgroup
  let items = k * groups;     // (pair j, column group), j-major
  let cpr = params.K / 32u;   // chunks per row
  let n0 = wid.x * CB;
  let res = combine_load(r, n0, lid);
  // The row's k pair rows of h, quantized into slots 0 .. k − 1.
  // The row's k pair rows of h, quantized into slots 0 .. k − 1.
  x8_span((r * k) * (params.K / 4u), k * (params.K / 8u), lid);
  workgroupBarrier();
  // Uniform trip count (shuffles); teams past the last item redo it and store nothing.
  for (var i0 = 0u; i0 < items; i0 += WG / T) {
    let i = min(i0 + team, items - 1u);
    let j = i / groups;
    let g = i % groups;
    let p = r * k + j;
    let rows = item_rows(p, n0 + g * CT);
    // The per-pair code above for one pair in slot j: the bits of its y.
    var a0 = vec4<f32>(0.0);
    var cur = x8_stage(rows, min(lane, cpr - 1u), cpr);
    for (var ci = lane; ci < cpr; ci += T) {
      let nxt = x8_stage(rows, min(ci + T, cpr - 1u), cpr);
      a0 += chunk_dot(cur, scale_bias(cur), j, ci);
      cur = nxt;
    }
    let acc = team_sum(a0);
    if (i0 + team < items) {
      for (var c = lane; c < CT; c += T) { ys[j * CB + g * CT + c] = acc[c]; }
    }
  }
  workgroupBarrier();
  combine_store(res, n0, lid);
}
#endif

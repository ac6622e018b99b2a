// Expert matmul for decode-like rows ("vec" mode): each (row, expert) pair multiplies one row by its own
// expert's weights (bandwidth-bound, like matmul_vec_q4.wgsl).
//   GATE_UP: h[p, i] = silu(x̂_r·W_e[i]) · (x̂_r·W_e[I + i])    W_e (2I, K), r = p / k, e = ids[p], i < I
//            x̂ = x, or under NORM the row's RMSNorm x·rsqrt(mean(x²) + eps)·gamma (decode rows skip the
//            rms_norm dispatch): the dots take x·gamma, Σx² is summed alongside, and both dots are scaled
//            by the row's factor before silu·up (as matmul_vec.wgsl's NORM)
//   else:    y[p, n] = h_p · W_e[n]                            W_e (N, K), x holds h (one row per pair)
//   for pairs p = P0 .. P0 + pairs − 1 whose expert is in this shard [e0, e0 + count) (others: skipped).
//   Only the routed experts' weights are read, each once per block of up to 4 of its pairs.
//   COMBINE (down; one shard holds every expert): no y, the row's k products go straight into the residual
//            with moe_combine.wgsl's arithmetic and order, so the bits are those of down then combine:
//            xr[r, n] += Σ_{j < k, in order} weights[r, j] · (h_{r·k+j} · W_{ids[r·k+j]}[n])
//                        (+ sigmoid(gate[r]) · sy[r, n] under SHARED: Qwen3-Next's gated shared expert)
// Weight formats (define): Q4, Q8 (with QUANT), WF16, WBF16; see lib/moe.wgsl.
// Bindings:  x      (rows, K) f32 (GATE_UP: the step's rows, raw residual under NORM; else (pairs, K): h)
//            w      (count·N, K·bits/128) vec4<u32>: expert e's row n is stack row (e − e0)·N + n
//            scales, biases (count·N, K/GS) 16-bit packed in u32 (QUANT)
//            ids    (pairs) u32;  y (pairs, cols) f32 (not under COMBINE)
//            gamma  (K) f32 (NORM: the RMSNorm weight)
//            xr (rows, N) f32 the residual, read and written; weights (rows, k) f32;
//            sy (rows, N) f32 and gate (rows) f32 logits (SHARED)                                (COMBINE)
// Grid: (ceil(cols / (CT·WG/T)), pairs). Workgroup y serves the expert of pair y if no earlier pair has it
// (else it exits): all that expert's pairs, in blocks of up to 4 rows per weight load. A team of T lanes
// computes 4 weight rows: GATE_UP gates j, j+1 and their up rows (h[j], h[j+1]: CT = 2), else 4 adjacent
// columns (CT = 4).
// COMBINE grid: (ceil(N / CB), M). Workgroup (x, y) serves columns x·CB .. x·CB + CB − 1 of row row0 + y:
// its WG/T teams take the items (pair j, group of 4 columns), j-major, a team per item at a time; each
// item's 4 sums go to workgroup memory, then lane c adds column c's k sums in j order into the residual
// (its residual value, shared term and the row's weights loaded before the products). Rows sharing an
// expert read it once each (decode rows are few).
// Lane t takes units t, t+T, ... of 16 bytes of each row (32 values of Q4, 16 of Q8, 8 of 16-bit), the
// next unit's words loaded before the current one is used; each x value feeds the 4 rows. The team then
// sums its lanes in a fixed order: shuffles (TEAM_SUBGROUP) or a workgroup-memory tree. A pair's arithmetic
// is the same whichever block slot it takes and however full the block is (batch invariance), and the
// same under COMBINE (for the same T).
// Params, bindings and the pieces shared with moe_vec_x8.wgsl (team rows, pair blocks, stores, COMBINE's
// load and sum): lib/moe_vec.wgsl.
#include "lib/common.wgsl"
#include "lib/moe.wgsl"

override WG: u32 = 128;
override T: u32 = 8;     // lanes per team: a power of two dividing WG (≤ the subgroup size with shuffles)

#ifdef Q4
const UV: u32 = 32u;     // weight values per 16-byte unit
#elif Q8
const UV: u32 = 16u;
#else
const UV: u32 = 8u;
#endif

#ifdef COMBINE
override CB: u32 = 8;    // columns per workgroup: a multiple of CT, at most WG
#endif
// After the overrides its declarations use (T, WG, CB).
#include "lib/moe_vec.wgsl"

#ifndef TEAM_SUBGROUP
var<workgroup> tred: array<vec4<f32>, WG>;
#endif

// One unit of the team's 4 rows as loaded: raw words, and the words holding each row's scale and bias.
// Nothing is converted at load time, so the loads stay in flight until the unit is used.
struct Stage { c0: vec4<u32>, c1: vec4<u32>, c2: vec4<u32>, c3: vec4<u32>, sw: vec4<u32>, bw: vec4<u32>,
               gi: vec4<u32> }

fn stage(rows: vec4<u32>, u: u32, upr: u32) -> Stage {
  var s: Stage;
  s.c0 = w[rows.x * upr + u];
  s.c1 = w[rows.y * upr + u];
  s.c2 = w[rows.z * upr + u];
  s.c3 = w[rows.w * upr + u];
#ifdef QUANT
  s.gi = rows * (params.K / GS) + vec4<u32>((u * UV) / GS);
  let h = s.gi >> vec4<u32>(1u);
  s.sw = vec4<u32>(scales[h.x], scales[h.y], scales[h.z], scales[h.w]);
  s.bw = vec4<u32>(biases[h.x], biases[h.y], biases[h.z], biases[h.w]);
#endif
  return s;
}

#ifdef Q4
// Σ q·x of one word against its 8 x values, per nibble position (still scaled by 16^k).
fn q4word(acc: vec4<f32>, q: u32, xa: vec4<f32>, xb: vec4<f32>) -> vec4<f32> {
  return fma(nib4(q >> 16u), xb, fma(nib4(q & 0xffffu), xa, acc));
}
#endif
#ifdef NORM
// x vec4 i of a row, times gamma vec4 g; its Σx² added to *ss.
fn xg(i: u32, g: u32, ss: ptr<function, f32>) -> vec4<f32> {
  let v = x[i];
  *ss += dot(v, v);
  return v * gamma[g];
}
#endif
#ifdef QUANT
fn hsum(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }
#else
// Σ w·x of one 16-bit unit (8 values) against x values xa, xb.
fn wdot16(c: vec4<u32>, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
  return dot(vec4<f32>(halves(c.x), halves(c.y)), xa) + dot(vec4<f32>(halves(c.z), halves(c.w)), xb);
}
#endif

// The unit's contribution to the 4 rows' dot products; its x vec4s start at xb + o (o: within the row).
// NORM: x·gamma, the unit's Σx² added to *ss (else ss is untouched).
fn unit_dot(s: Stage, xb: u32, o: u32, ss: ptr<function, f32>) -> vec4<f32> {
#ifdef Q4
  var p0 = vec4<f32>(0.0);
  var p1 = vec4<f32>(0.0);
  var p2 = vec4<f32>(0.0);
  var p3 = vec4<f32>(0.0);
  var sx = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) {
#ifdef NORM
    let xa = xg(xb + o + 2u * j, o + 2u * j, ss);
    let xc = xg(xb + o + 2u * j + 1u, o + 2u * j + 1u, ss);
#else
    let xa = x[xb + o + 2u * j];
    let xc = x[xb + o + 2u * j + 1u];
#endif
    sx += xa + xc;
    p0 = q4word(p0, s.c0[j], xa, xc);
    p1 = q4word(p1, s.c1[j], xa, xc);
    p2 = q4word(p2, s.c2[j], xa, xc);
    p3 = q4word(p3, s.c3[j], xa, xc);
  }
  let d = vec4<f32>(dot(p0, NIB), dot(p1, NIB), dot(p2, NIB), dot(p3, NIB));
#elif Q8
  var p0 = vec4<f32>(0.0);
  var p1 = vec4<f32>(0.0);
  var p2 = vec4<f32>(0.0);
  var p3 = vec4<f32>(0.0);
  var sx = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) {
#ifdef NORM
    let xa = xg(xb + o + j, o + j, ss);
#else
    let xa = x[xb + o + j];
#endif
    sx += xa;
    p0 = fma(byte4(s.c0[j]), xa, p0);
    p1 = fma(byte4(s.c1[j]), xa, p1);
    p2 = fma(byte4(s.c2[j]), xa, p2);
    p3 = fma(byte4(s.c3[j]), xa, p3);
  }
  let d = vec4<f32>(hsum(p0), hsum(p1), hsum(p2), hsum(p3));
#else
#ifdef NORM
  let xa = xg(xb + o, o, ss);
  let xc = xg(xb + o + 1u, o + 1u, ss);
#else
  let xa = x[xb + o];
  let xc = x[xb + o + 1u];
#endif
  return vec4<f32>(wdot16(s.c0, xa, xc), wdot16(s.c1, xa, xc), wdot16(s.c2, xa, xc), wdot16(s.c3, xa, xc));
#endif
#ifdef QUANT
  // w = scale·q + bias: scale·Σq·x + bias·Σx per row.
  let sc = vec4<f32>(half_at(s.sw.x, s.gi.x), half_at(s.sw.y, s.gi.y), half_at(s.sw.z, s.gi.z),
                     half_at(s.sw.w, s.gi.w));
  let bi = vec4<f32>(half_at(s.bw.x, s.gi.x), half_at(s.bw.y, s.gi.y), half_at(s.bw.z, s.gi.z),
                     half_at(s.bw.w, s.gi.w));
  return sc * d + bi * hsum(sx);
#endif
}

// Sum over the team's T lanes in a fixed order; every lane of the team ends with the same bits.
fn team_sum(v: vec4<f32>, lid: u32, lane: u32) -> vec4<f32> {
#ifdef TEAM_SUBGROUP
  var s = v;
  for (var mask = T / 2u; mask > 0u; mask = mask >> 1u) { s += subgroupShuffleXor(s, mask); }
  return s;
#else
  tred[lid] = v;
  workgroupBarrier();
  for (var h = T / 2u; h > 0u; h = h >> 1u) {
    if (lane < h) { tred[lid] = tred[lid] + tred[lid + h]; }
    workgroupBarrier();
  }
  let s = tred[lid - lane];
  workgroupBarrier();   // tred is reused by the next row
  return s;
#endif
}

#ifndef COMBINE
#ifdef NORM
// Row norm factors from Σx², as matmul_vec.wgsl's.
fn norm_factors(ss: vec4<f32>) -> vec4<f32> {
  return inverseSqrt(ss / f32(params.K) + params.eps);
}
#endif

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let q0 = wid.y;
  let e = ids[params.P0 + q0];
  // ids is read-only, so values read at uniform indices are uniform: the exits and the row blocks below
  // are the same for the whole workgroup, and the barriers stay legal.
  if (!serves(e, q0)) { return; }
  let team = lid / T;
  let lane = lid % T;
  let tid = wid.x * (WG / T) + team;
  let rows = team_rows(tid, (e - params.e0) * params.N);
  let upr = params.K / UV;   // units per row
  var q = q0;
  loop {
    let b = next_block(e, &q);
    let blk = b.p;
    let n = b.n;
    if (n == 0u) { break; }
    let xb = (blk / vec4<u32>(params.kdiv)) * (params.K / 4u);
    // Row by row, the same code whatever n is: a pair's bits never depend on the other pairs.
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var s0 = 0.0;   // Σx² of each slot's row (NORM)
    var s1 = 0.0;
    var s2 = 0.0;
    var s3 = 0.0;
    var cur = stage(rows, min(lane, upr - 1u), upr);
    for (var u = lane; u < upr; u += T) {
      let nxt = stage(rows, min(u + T, upr - 1u), upr);
      let o = u * (UV / 4u);
      a0 += unit_dot(cur, xb.x, o, &s0);
      if (n > 1u) { a1 += unit_dot(cur, xb.y, o, &s1); }
      if (n > 2u) {
        a2 += unit_dot(cur, xb.z, o, &s2);
        a3 += unit_dot(cur, xb.w, o, &s3);
      }
      cur = nxt;
    }
#ifdef NORM
    let f = norm_factors(team_sum(vec4<f32>(s0, s1, s2, s3), lid, lane));
#else
    let f = vec4<f32>(1.0);
#endif
    store_pair(blk.x, tid, lane, team_sum(a0, lid, lane), f.x);
    if (n > 1u) { store_pair(blk.y, tid, lane, team_sum(a1, lid, lane), f.y); }
    if (n > 2u) { store_pair(blk.z, tid, lane, team_sum(a2, lid, lane), f.z); }
    if (n > 3u) { store_pair(blk.w, tid, lane, team_sum(a3, lid, lane), f.w); }
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
  let upr = params.K / UV;    // units per row
  let n0 = wid.x * CB;
  let res = combine_load(r, n0, lid);
  // Uniform trip count (the tree's barriers); teams past the last item redo it and store nothing.
  for (var i0 = 0u; i0 < items; i0 += WG / T) {
    let i = min(i0 + team, items - 1u);
    let j = i / groups;
    let g = i % groups;
    let p = r * k + j;
    let rows = item_rows(p, n0 + g * CT);
    let xb = p * (params.K / 4u);
    // The per-pair code above for one pair in slot 0: the bits of its y.
    var a0 = vec4<f32>(0.0);
    var s0 = 0.0;
    var cur = stage(rows, min(lane, upr - 1u), upr);
    for (var u = lane; u < upr; u += T) {
      let nxt = stage(rows, min(u + T, upr - 1u), upr);
      a0 += unit_dot(cur, xb, u * (UV / 4u), &s0);
      cur = nxt;
    }
    let acc = team_sum(a0, lid, lane);
    if (i0 + team < items) {
      for (var c = lane; c < CT; c += T) { ys[j * CB + g * CT + c] = acc[c]; }
    }
  }
  workgroupBarrier();
  combine_store(res, n0, lid);
}
#endif

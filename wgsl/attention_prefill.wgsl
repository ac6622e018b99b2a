// Causal attention for a prefill segment (rows row0 .. row0+S−1 of one sequence, consecutive positions),
// tiled with an online softmax so memory does not grow with the prompt (flash attention):
//   out[i, qh] = Σ_{j ≤ pos_i} softmax_j(q_i,qh · k_j · scale) · v_j,   K/V read through the page table
// (the segment's own K/V were written by rope.wgsl before this runs).
// Bindings:  rows  (R) step rows: pos, slot
//            q     (R, nq·hd) act
//            pages (slots, max_pages) u32;  kv (pages, 2, nkv, ps, hd) act
//            KV8: kv the same layout as q8 codes, kvs (pages, 2, nkv, ps, hd/QB) f32 scales
//            out   (R, nq·hd) f32 (a matmul input)
// Grid: (ceil(S / BQ), nkv). A workgroup holds 2·QV query vectors (QV = WG/L lane groups of L = HD/(4·NV4)
// lanes, two vectors per group, 4·NV4 ≤ 32 dims per lane in registers): BQ positions × the G query heads
// of one kv head. It walks key tiles of BK from 0 to its last position: the tile is loaded once into
// workgroup memory as f32 (rows padded by one vec4 per 8 so a group's lanes read distinct banks), then each
// lane group runs an online softmax over the tile for both its vectors, two keys per step (PKEYS4: four,
// lib/prefill_keys4.wgsl; PKEYS8 with HPV: eight, lib/prefill_keys8.wgsl); dots are summed over the group's
// L lanes by subgroup shuffles. Per-lane state is named vec4s, never arrays (those go to local memory).
// PACKED (f16 cache): the tile is copied as the cache's f16 words (16-byte loads, half the workgroup memory
// and half its reads per FMA) and unpacked to f32 at use, rows padded by one vec4 per lane's PV = NV4/2; the
// same f32 values meet the same float ops in the same order, so the bits equal the f32 tile's.
// Tile loads: lib/prefill_tile.wgsl (PF, with PACKED or QK8 + HPV: the next tile in registers meanwhile).
// KV8 (8-bit cache): the tile load dequantizes 4 codes per u32 into the f32 tile. QK8 (with KV8, 32 dims per
// lane): q·k on integer dot products over the K tile's codes (lib/prefill_qk8.wgsl); V as under KV8, or
// with HPV (and VPK: the V tile in PACKED's layout) rounded to f16, its P·V summed in f16 per step's keys.
// HPV also serves the f16 cache (PACKED; its V tile: the cache's values). QUAD (HPV, HD 128 or 64, subgroups):
// four vectors per group of HD/16 lanes, main: lib/prefill_quad.wgsl (HQK there: f16 q·k, K tile as f16).
#include "lib/common.wgsl"
#ifdef KV8
#include "lib/kv8.wgsl"
#endif

override HD: u32 = 128;
override G: u32 = 1;
override BK: u32 = 32;       // keys per tile (even)
override WG: u32 = 256;
const NV4: u32 = {{NV4}}u;   // vec4s of the head per lane: 2, 4 or 8
override L: u32 = HD / (4u * NV4);  // lanes per query vector
override QV: u32 = WG / L;   // query vectors per workgroup
override BQ: u32 = 1;        // positions per workgroup (BQ·G ≤ 2·QV)
override H4: u32 = HD / 4u;  // vec4s per head row
override RS: u32 = H4 + H4 / 8u;  // padded vec4s per tile row

struct Params {
  row0: u32,       // first step row of the segment
  S: u32,          // rows in the segment
  nq: u32,         // query heads
  nkv: u32,        // kv heads
  ps: u32,         // page size (tokens)
  max_pages: u32,  // page-table row length
  scale: f32,      // softmax scale
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> q: array<act>;
@group(0) @binding(3) var<storage, read> pages: array<u32>;
#ifdef KV8
@group(0) @binding(4) var<storage, read> kv: array<u32>;
@group(0) @binding(6) var<storage, read> kvs: array<f32>;
#elif PACKED
@group(0) @binding(4) var<storage, read> kv: array<vec4<u32>>;
#else
@group(0) @binding(4) var<storage, read> kv: array<act>;
#endif
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

#ifdef VPK
const PV: u32 = NV4 / 2u;               // packed vec4s (8 dims each) per lane
override H8: u32 = HD / 8u;             // packed vec4s per head row
#ifdef QUAD
override PRS: u32 = H8;                 // unpadded (units swizzled: at())
#else
override PRS: u32 = H8 + H8 / PV;       // padded packed vec4s per tile row
#endif
#ifdef HPV
// HPV: the V tile as f16 values, eight (dims 8j .. 8j+7) per position in one Hh: one 16-byte read (as two
// vec4<f16> arrays it took two 8-byte reads; H200, q8: 15.7 → 14.2 ms per 4B layer at depth 12k).
struct Hh { x: vec4<f16>, y: vec4<f16> }
var<workgroup> vs: array<Hh, BK * PRS>;
fn vh(i: u32) -> Hh { return vs[i]; }
fn vput(i: u32, x: vec4<f32>, y: vec4<f32>) { vs[i] = Hh(vec4<f16>(x), vec4<f16>(y)); }
#else
var<workgroup> vs: array<vec4<u32>, BK * PRS>;
#endif
#ifdef HQK
var<workgroup> ks: array<Hh, BK * PRS>;  // HQK (QUAD, f16 cache): K as f16 values for f16 q·k
#elif PACKED
var<workgroup> ks: array<vec4<u32>, BK * PRS>;
#endif
#ifdef QUAD
// Position of packed vec4 d8 of tile row t (lib/prefill_quad.wgsl: the lanes of a quarter-warp read units
// 2ℓ + j of rows four apart; flipping bit 0 by bit 3 puts them in 8 distinct bank groups).
fn at(t: u32, d8: u32) -> u32 { return t * PRS + (d8 ^ ((d8 >> 3u) & 1u)); }
#else
// Padded position of packed vec4 d8 of tile row t.
fn at(t: u32, d8: u32) -> u32 { return t * PRS + d8 + d8 / PV; }
#endif
fn lo8(k: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(k.x), unpack2x16float(k.y)); }
fn hi8(k: vec4<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(k.z), unpack2x16float(k.w)); }
#else
#ifndef QK8
var<workgroup> ks: array<vec4<f32>, BK * RS>;
#endif
var<workgroup> vs: array<vec4<f32>, BK * RS>;
#endif
#ifndef LANE_SUBGROUP
var<workgroup> sm_dot: array<vec4<f32>, WG>;
#endif

// Element offset of key j's row in kv head h of the sequence whose page-table row starts at prow.
fn key_row(prow: u32, pstride: u32, h: u32, j: u32) -> u32 {
  let ps = params.ps;
  return pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD;
}

#include "lib/prefill_tile.wgsl"

#ifndef VPK
fn ld4(e: u32) -> vec4<f32> {
#ifdef KV8
  return kv8_unpack(kv[e / 4u], kvs[e / QB]);
#else
  return vec4<f32>(f32(kv[e]), f32(kv[e + 1u]), f32(kv[e + 2u]), f32(kv[e + 3u]));
#endif
}
// Padded position of vec4 d4 of tile row t.
fn at(t: u32, d4: u32) -> u32 { return t * RS + d4 + d4 / 8u; }
#endif

// A lane's slice of one head vector (4·NV4 dims).
struct Hv { v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>, v4: vec4<f32>, v5: vec4<f32>, v6: vec4<f32>, v7: vec4<f32> }

fn qload(o: u32, s: f32) -> Hv {
  var h: Hv;
  h.v0 = vec4<f32>(f32(q[o]), f32(q[o + 1u]), f32(q[o + 2u]), f32(q[o + 3u])) * s;
  h.v1 = vec4<f32>(f32(q[o + 4u]), f32(q[o + 5u]), f32(q[o + 6u]), f32(q[o + 7u])) * s;
#if NV4GE4
  h.v2 = vec4<f32>(f32(q[o + 8u]), f32(q[o + 9u]), f32(q[o + 10u]), f32(q[o + 11u])) * s;
  h.v3 = vec4<f32>(f32(q[o + 12u]), f32(q[o + 13u]), f32(q[o + 14u]), f32(q[o + 15u])) * s;
#endif
#if NV4GE8
  h.v4 = vec4<f32>(f32(q[o + 16u]), f32(q[o + 17u]), f32(q[o + 18u]), f32(q[o + 19u])) * s;
  h.v5 = vec4<f32>(f32(q[o + 20u]), f32(q[o + 21u]), f32(q[o + 22u]), f32(q[o + 23u])) * s;
  h.v6 = vec4<f32>(f32(q[o + 24u]), f32(q[o + 25u]), f32(q[o + 26u]), f32(q[o + 27u])) * s;
  h.v7 = vec4<f32>(f32(q[o + 28u]), f32(q[o + 29u]), f32(q[o + 30u]), f32(q[o + 31u])) * s;
#endif
  return h;
}

// Dims 8j .. 8j+7 of this lane's slice of the K (V) tile row starting at padded index b, as f32: two vec4s
// of the f32 tile, or one packed vec4 unpacked (each word read once). krow / vrow, kdot2: lib/prefill_rows.
struct Two { a: vec4<f32>, b: vec4<f32> }
#ifdef QK8
#include "lib/prefill_qk8.wgsl"
#endif
#include "lib/prefill_rows.wgsl"
// Online-softmax state of one query vector.
struct Soft { m: f32, l: f32, o: Hv }
struct Pair { a: Soft, b: Soft }

// (new max, rescale of the old state, weight of key a, weight of key b) for scores da, db (−inf when
// masked). Key 0 is always visible, so the running max is finite from the first pair on.
fn weights(m: f32, da: f32, db: f32) -> vec4<f32> {
  let mn = max(m, max(da, db));
  return vec4<f32>(mn, exp(m - mn), exp(da - mn), exp(db - mn));
}

// Adds two keys (V rows at padded indices ra, rb) to both query vectors' states; each V value is read from
// workgroup memory once for both.
fn step2(s: Pair, wa: vec4<f32>, wb: vec4<f32>, ra: u32, rb: u32) -> Pair {
  var r: Pair;
  r.a.m = wa.x;
  r.b.m = wb.x;
  r.a.l = s.a.l * wa.y + wa.z + wa.w;
  r.b.l = s.b.l * wb.y + wb.z + wb.w;
  var v = vrow(ra, 0u);
  var u = vrow(rb, 0u);
  r.a.o.v0 = s.a.o.v0 * wa.y + wa.z * v.a + wa.w * u.a;
  r.b.o.v0 = s.b.o.v0 * wb.y + wb.z * v.a + wb.w * u.a;
  r.a.o.v1 = s.a.o.v1 * wa.y + wa.z * v.b + wa.w * u.b;
  r.b.o.v1 = s.b.o.v1 * wb.y + wb.z * v.b + wb.w * u.b;
#if NV4GE4
  v = vrow(ra, 1u);
  u = vrow(rb, 1u);
  r.a.o.v2 = s.a.o.v2 * wa.y + wa.z * v.a + wa.w * u.a;
  r.b.o.v2 = s.b.o.v2 * wb.y + wb.z * v.a + wb.w * u.a;
  r.a.o.v3 = s.a.o.v3 * wa.y + wa.z * v.b + wa.w * u.b;
  r.b.o.v3 = s.b.o.v3 * wb.y + wb.z * v.b + wb.w * u.b;
#endif
#if NV4GE8
  v = vrow(ra, 2u);
  u = vrow(rb, 2u);
  r.a.o.v4 = s.a.o.v4 * wa.y + wa.z * v.a + wa.w * u.a;
  r.b.o.v4 = s.b.o.v4 * wb.y + wb.z * v.a + wb.w * u.a;
  r.a.o.v5 = s.a.o.v5 * wa.y + wa.z * v.b + wa.w * u.b;
  r.b.o.v5 = s.b.o.v5 * wb.y + wb.z * v.b + wb.w * u.b;
  v = vrow(ra, 3u);
  u = vrow(rb, 3u);
  r.a.o.v6 = s.a.o.v6 * wa.y + wa.z * v.a + wa.w * u.a;
  r.b.o.v6 = s.b.o.v6 * wb.y + wb.z * v.a + wb.w * u.a;
  r.a.o.v7 = s.a.o.v7 * wa.y + wa.z * v.b + wa.w * u.b;
  r.b.o.v7 = s.b.o.v7 * wb.y + wb.z * v.b + wb.w * u.b;
#endif
  return r;
}

#ifdef PKEYS4
#include "lib/prefill_keys4.wgsl"
#endif
#ifdef PKEYS8
#include "lib/prefill_keys8.wgsl"
#endif

fn emit(row: u32, qh: u32, b: u32, s: Soft) {
  let ob = row * params.nq * HD + qh * HD + b * 4u;
  let inv = 1.0 / s.l;
  let w = array<vec4<f32>, 8>(s.o.v0, s.o.v1, s.o.v2, s.o.v3, s.o.v4, s.o.v5, s.o.v6, s.o.v7);
  for (var k = 0u; k < NV4; k++) {
    for (var c = 0u; c < 4u; c++) { out[ob + k * 4u + c] = w[k][c] * inv; }
  }
}

// Padded index of this lane's slice of tile row t (`off`: its offset in a row).
fn trow(t: u32, off: u32) -> u32 {
#ifdef VPK
  return t * PRS + off;
#else
  return t * RS + off;
#endif
}

#ifdef QK8
fn score2(qa: Q8, qb: Q8, t: u32, r: u32, lane: u32) -> vec2<f32> { return kdot2q(qa, qb, t, lane); }
#else
fn score2(qa: Hv, qb: Hv, t: u32, r: u32, lane: u32) -> vec2<f32> { return kdot2(qa, qb, r); }
#endif

#ifndef LANE_SUBGROUP
// Sum of a group's L partial dot products, through workgroup memory.
fn group_sum(d: vec4<f32>, lid: u32, grp: u32) -> vec4<f32> {
  sm_dot[lid] = d;
  workgroupBarrier();
  var s = vec4<f32>(0.0);
  for (var x = 0u; x < L; x++) { s += sm_dot[grp * L + x]; }
  workgroupBarrier();
  return s;
}
#endif

#ifdef QUAD
#include "lib/prefill_quad.wgsl"
#else
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y;
  let i0 = wid.x * BQ;
  let nqb = min(BQ, params.S - i0);
  let nq = params.nq;
  let nkv = params.nkv;
  let ps = params.ps;
  let pstride = 2u * nkv * ps * HD;
  let first = rows[params.row0 + i0];
  let prow = first.slot * params.max_pages;
  let kmax = rows[params.row0 + i0 + nqb - 1u].pos + 1u;

  // This lane group's two query vectors: vector v = grp and grp + QV, each position i = v / G, head
  // g = v % G (vectors past BQ·G are idle but keep step). Two per group: each K/V value read from
  // workgroup memory feeds both.
  let grp = lid / L;
  let lane = lid % L;
  let b = lane * NV4;              // first vec4 of this lane's dims
#ifdef VPK
  let off = lane * (PV + 1u);      // its padded offset in a tile row
#else
  let off = b + b / 8u;            // its padded offset in a tile row
#endif
  let va = grp;
  let vb = grp + QV;
  let ia = min(va / G, nqb - 1u);
  let ib = min(vb / G, nqb - 1u);
  let rowa = params.row0 + i0 + ia;
  let rowb = params.row0 + i0 + ib;
  let posa = rows[rowa].pos;
  let posb = rows[rowb].pos;
  let qha = h * G + va % G;
  let qhb = h * G + vb % G;
#ifdef QK8
  let qa = qquant(qload(rowa * nq * HD + qha * HD + b * 4u, params.scale));
  let qb = qquant(qload(rowb * nq * HD + qhb * HD + b * 4u, params.scale));
#else
  let qa = qload(rowa * nq * HD + qha * HD + b * 4u, params.scale);
  let qb = qload(rowb * nq * HD + qhb * HD + b * 4u, params.scale);
#endif

  var st: Pair;
  st.a.m = -3.0e38;
  st.b.m = -3.0e38;
#ifdef PF
  var pf = pf_load(lid, 0u, min(BK, kmax), prow, pstride, h);
#endif
  for (var kt = 0u; kt < kmax; kt += BK) {
    let nk = min(BK, kmax - kt);
#ifdef PF
    pf_store(lid, pf);
    workgroupBarrier();
    if (kt + BK < kmax) { pf = pf_load(lid, kt + BK, min(BK, kmax - kt - BK), prow, pstride, h); }
#else
    load_tile(lid, kt, nk, prow, pstride, h);
    workgroupBarrier();
#endif
    // (The step loops stay inline: written as functions of the state they ran 8–10% slower on the H200.)
#ifdef PKEYS8
    for (var t = 0u; t < nk; t += 8u) {
      let tl = min(vec4<u32>(t) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(nk - 1u));
      let th = min(vec4<u32>(t) + vec4<u32>(4u, 5u, 6u, 7u), vec4<u32>(nk - 1u));
      let r = vec4<u32>(trow(tl.x, off), trow(tl.y, off), trow(tl.z, off), trow(tl.w, off));
      let u = vec4<u32>(trow(th.x, off), trow(th.y, off), trow(th.z, off), trow(th.w, off));
      // (qa·k, qb·k) for keys t .. t+7, two keys per vec4.
      var d01 = vec4<f32>(score2(qa, qb, tl.x, r.x, lane), score2(qa, qb, tl.y, r.y, lane));
      var d23 = vec4<f32>(score2(qa, qb, tl.z, r.z, lane), score2(qa, qb, tl.w, r.w, lane));
      var d45 = vec4<f32>(score2(qa, qb, th.x, u.x, lane), score2(qa, qb, th.y, u.y, lane));
      var d67 = vec4<f32>(score2(qa, qb, th.z, u.z, lane), score2(qa, qb, th.w, u.w, lane));
#ifdef LANE_SUBGROUP
      for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) {
        d01 += subgroupShuffleXor(d01, mask);
        d23 += subgroupShuffleXor(d23, mask);
        d45 += subgroupShuffleXor(d45, mask);
        d67 += subgroupShuffleXor(d67, mask);
      }
#else
      d01 = group_sum(d01, lid, grp);
      d23 = group_sum(d23, lid, grp);
      d45 = group_sum(d45, lid, grp);
      d67 = group_sum(d67, lid, grp);
#endif
      // Causal mask and the pad keys of a tile whose length is not a multiple of 8: weight e^-inf = 0.
      let jl = vec4<u32>(kt + t) + vec4<u32>(0u, 1u, 2u, 3u);
      let jh = jl + vec4<u32>(4u);
      let okl = jl < vec4<u32>(kt + nk);
      let okh = jh < vec4<u32>(kt + nk);
      let neg = vec4<f32>(-3.0e38);
      let wa = weights8(st.a.m, select(neg, vec4<f32>(d01.x, d01.z, d23.x, d23.z), okl & (jl <= vec4<u32>(posa))),
                        select(neg, vec4<f32>(d45.x, d45.z, d67.x, d67.z), okh & (jh <= vec4<u32>(posa))));
      let wb = weights8(st.b.m, select(neg, vec4<f32>(d01.y, d01.w, d23.y, d23.w), okl & (jl <= vec4<u32>(posb))),
                        select(neg, vec4<f32>(d45.y, d45.w, d67.y, d67.w), okh & (jh <= vec4<u32>(posb))));
      st = step8(st, wa, wb, r, u);
    }
#elif PKEYS4
    for (var t = 0u; t < nk; t += 4u) {
      let t1 = min(t + 1u, nk - 1u);
      let t2 = min(t + 2u, nk - 1u);
      let t3 = min(t + 3u, nk - 1u);
      let r0 = trow(t, off);
      let r1 = trow(t1, off);
      let r2 = trow(t2, off);
      let r3 = trow(t3, off);
      // (qa·k_t, qb·k_t, qa·k_t1, qb·k_t1) and the same for t2, t3.
      var d01 = vec4<f32>(score2(qa, qb, t, r0, lane), score2(qa, qb, t1, r1, lane));
      var d23 = vec4<f32>(score2(qa, qb, t2, r2, lane), score2(qa, qb, t3, r3, lane));
#ifdef LANE_SUBGROUP
      for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) {
        d01 += subgroupShuffleXor(d01, mask);
        d23 += subgroupShuffleXor(d23, mask);
      }
#else
      d01 = group_sum(d01, lid, grp);
      d23 = group_sum(d23, lid, grp);
#endif
      // Causal mask and the pad keys of a tile whose length is not a multiple of 4: weight e^-inf = 0.
      let j = kt + t;
      let ok = vec4<bool>(true, t + 1u < nk, t + 2u < nk, t + 3u < nk);
      let jj = vec4<u32>(j, j + 1u, j + 2u, j + 3u);
      let neg = vec4<f32>(-3.0e38);
      let wa = weights4(st.a.m, select(neg, vec4<f32>(d01.x, d01.z, d23.x, d23.z), ok & (jj <= vec4<u32>(posa))));
      let wb = weights4(st.b.m, select(neg, vec4<f32>(d01.y, d01.w, d23.y, d23.w), ok & (jj <= vec4<u32>(posb))));
      st = step4(st, wa, wb, r0, r1, r2, r3);
    }
#else
    for (var t = 0u; t < nk; t += 2u) {
      let tb = min(t + 1u, nk - 1u);
      let ra = trow(t, off);
      let rb = trow(tb, off);
      var d = vec4<f32>(score2(qa, qb, t, ra, lane), score2(qa, qb, tb, rb, lane));   // (qa·k_t, qb·k_t, qa·k_tb, qb·k_tb)
#ifdef LANE_SUBGROUP
      for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) { d += subgroupShuffleXor(d, mask); }
#else
      d = group_sum(d, lid, grp);
#endif
      // Causal mask (and the pad key of an odd tile): weight e^-inf = 0.
      let j = kt + t;
      let second = t + 1u < nk;
      let wa = weights(st.a.m, select(-3.0e38, d.x, j <= posa), select(-3.0e38, d.z, j + 1u <= posa && second));
      let wb = weights(st.b.m, select(-3.0e38, d.y, j <= posb), select(-3.0e38, d.w, j + 1u <= posb && second));
      st = step2(st, wa, wb, ra, rb);
    }
#endif
    workgroupBarrier();
  }
  if (va < nqb * G) { emit(rowa, qha, b, st.a); }
  if (vb < nqb * G) { emit(rowb, qhb, b, st.b); }
}
#endif

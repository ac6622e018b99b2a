// Causal attention for a prefill segment (rows row0 .. row0+S−1 of one sequence, consecutive positions),
// tiled with an online softmax so memory does not grow with the prompt (flash attention):
//   out[i, qh] = Σ_{j ≤ pos_i} softmax_j(q_i,qh · k_j · scale) · v_j,   K/V read through the page table
// (the segment's own K/V were written by rope.wgsl before this runs). Head dims 128 and 64 on f16 P·V with
// subgroups take attention_prefill_quad.wgsl instead.
// WINDOW (sliding window, params.window): the sum runs over pos_i − window < j ≤ pos_i only (masked keys
// weigh exactly 0: lib/prefill.wgsl's seen() and M0), and key tiles wholly before the window of the
// workgroup's first position are skipped.
// Bindings:  rows  (R) step rows: pos, slot
//            q     (R, nq·hd) act
//            pages (slots, max_pages) u32;  kv (pages, 2, nkv, ps, hd) act
//            KV8: kv the same layout as q8 codes, kvs (pages, 2, nkv, ps, hd/QB) f32 scales
//            out   (R, nq·hd) f32 (a matmul input)
// Grid: (ceil(S / BQ), nkv). A workgroup holds 2·QV query vectors (QV = WG/L lane groups of L = HD/(4·NV4)
// lanes, two vectors per group, 4·NV4 ≤ 32 dims per lane in registers): BQ positions × the G query heads
// of one kv head. It walks key tiles of BK from 0 to its last position: the tile is loaded once into
// workgroup memory (lib/prefill_tile.wgsl), then each lane group runs an online softmax over the tile for
// both its vectors, four keys per step (F16_PV: eight, the f16 P·V partial summing all eight before it meets
// the f32 state); dots are summed over the group's L lanes by subgroup shuffles (LANE_SUBGROUP) or through
// workgroup memory. Keys are grouped from multiples of four (eight) in every tile and masked keys leave the
// state bit-for-bit unchanged, so a row's bits do not depend on the tile or segment shape. Per-lane state is
// named vec4s, never arrays (those go to local memory).
// Tiles (variants: lib/prefill.wgsl): f32 rows padded by one vec4 per 8 so a group's lanes read distinct
// banks; F16_TILES: the cache's f16 words, unpacked to f32 at use (the same values meet the same float
// ops), rows padded by one 16-byte unit per lane's PV = NV4/2; INT8_QK: K codes (lib/prefill_qk8.wgsl).
#include "lib/common.wgsl"
#ifdef KV8
#include "lib/kv8.wgsl"
#endif
#include "lib/prefill_params.wgsl"
#include "lib/prefill.wgsl"
#include "lib/prefill_tile.wgsl"
#ifdef INT8_QK
#include "lib/prefill_qk8.wgsl"
#endif

#ifdef F16_PV
override PRS: u32 = H8 + H8 / PV;       // padded 16-byte units per tile row
// Padded position of 16-byte unit d8 of tile row t.
fn at(t: u32, d8: u32) -> u32 { return t * PRS + d8 + d8 / PV; }
#else
// Padded position of vec4 d4 of tile row t.
fn at(t: u32, d4: u32) -> u32 { return t * RS + d4 + d4 / 8u; }
#endif
#ifndef LANE_SUBGROUP
var<workgroup> sm_dot: array<vec4<f32>, WG>;
#endif

// Dims 8j .. 8j+7 of this lane's slice of a K (V) tile row starting at padded index b, as f32: two vec4s
// of the f32 tile, or one 16-byte unit of f16 words unpacked (each word read once).
struct Two { a: vec4<f32>, b: vec4<f32> }
#ifndef INT8_QK
#ifdef F16_TILES
fn krow(b: u32, j: u32) -> Two { let p = ks[b + j]; return Two(lo8(p), hi8(p)); }
#else
fn krow(b: u32, j: u32) -> Two { return Two(ks[b + 2u * j], ks[b + 2u * j + 1u]); }
#endif

// Partial q·k of both query vectors over this lane's dims, for the k row starting at padded index kb: fused
// multiply-adds in two chains (even and odd vec4s of the lane's dims) added at the end, one instruction per
// product (dot() and an add take five per four).
fn fd(d: vec2<f32>, qa: vec4<f32>, qb: vec4<f32>, k: vec4<f32>) -> vec2<f32> {
  return fma(vec2<f32>(qa.w, qb.w), vec2<f32>(k.w), fma(vec2<f32>(qa.z, qb.z), vec2<f32>(k.z),
         fma(vec2<f32>(qa.y, qb.y), vec2<f32>(k.y), fma(vec2<f32>(qa.x, qb.x), vec2<f32>(k.x), d))));
}
fn kdot2(qa: Hv, qb: Hv, kb: u32) -> vec2<f32> {
  var k = krow(kb, 0u);
  var e = fd(vec2<f32>(0.0), qa.v0, qb.v0, k.a);
  var o = fd(vec2<f32>(0.0), qa.v1, qb.v1, k.b);
#ifdef LANE_16_DIMS
  k = krow(kb, 1u);
  e = fd(e, qa.v2, qb.v2, k.a);
  o = fd(o, qa.v3, qb.v3, k.b);
#endif
#ifdef LANE_32_DIMS
  k = krow(kb, 2u);
  e = fd(e, qa.v4, qb.v4, k.a);
  o = fd(o, qa.v5, qb.v5, k.b);
  k = krow(kb, 3u);
  e = fd(e, qa.v6, qb.v6, k.a);
  o = fd(o, qa.v7, qb.v7, k.b);
#endif
  return e + o;
}
fn score2(qa: Hv, qb: Hv, t: u32, r: u32, lane: u32) -> vec2<f32> { return kdot2(qa, qb, r); }
#else
fn score2(qa: Q8, qb: Q8, t: u32, r: u32, lane: u32) -> vec2<f32> { return kdot2q(qa, qb, t, lane); }
#endif

// Online-softmax state of one query vector.
struct Soft { m: f32, l: f32, o: Hv }
struct Pair { a: Soft, b: Soft }

#ifdef F16_PV
// Eight keys per step: the f16 P·V partial of a query vector sums eight keys (packed f16 FMAs, two dims per
// instruction, no unpacking) before it is converted and added to the f32 state, and the state is rescaled
// once per eight keys. The partial carries f16 rounding of eight products (p ≤ 1), not the running sum.
struct Part { a: Two, b: Two }

struct W8 { mn: f32, c: f32, p: vec4<f32>, q: vec4<f32> }

// New max, rescale of the old state, and the weights of keys 0–3 (p) and 4–7 (q) (masked: −3e38, weight 0).
fn weights8(m: f32, lo: vec4<f32>, hi: vec4<f32>) -> W8 {
  let x = max(lo, hi);
  let mn = max(m, max(max(x.x, x.y), max(x.z, x.w)));
  return W8(mn, exp(m - mn), exp(lo - vec4<f32>(mn)), exp(hi - vec4<f32>(mn)));
}

fn sum8h(x0: vec4<f16>, x1: vec4<f16>, x2: vec4<f16>, x3: vec4<f16>, x4: vec4<f16>, x5: vec4<f16>,
         x6: vec4<f16>, x7: vec4<f16>, h: vec4<f16>, k: vec4<f16>) -> vec4<f16> {
  return fma(x7, vec4<f16>(k.w), fma(x6, vec4<f16>(k.z), fma(x5, vec4<f16>(k.y), fma(x4, vec4<f16>(k.x),
         fma(x3, vec4<f16>(h.w), fma(x2, vec4<f16>(h.z), fma(x1, vec4<f16>(h.y), x0 * vec4<f16>(h.x))))))));
}

// Both vectors' partials of 8 dims (packed position j of the rows r (keys 0–3), u (keys 4–7)), each V value
// read once for both.
fn part8(r: vec4<u32>, u: vec4<u32>, j: u32, ha: vec4<f16>, ka: vec4<f16>, hb: vec4<f16>,
         kb: vec4<f16>) -> Part {
  let p0 = vh(r.x + j);
  let p1 = vh(r.y + j);
  let p2 = vh(r.z + j);
  let p3 = vh(r.w + j);
  let p4 = vh(u.x + j);
  let p5 = vh(u.y + j);
  let p6 = vh(u.z + j);
  let p7 = vh(u.w + j);
  return Part(Two(vec4<f32>(sum8h(p0.x, p1.x, p2.x, p3.x, p4.x, p5.x, p6.x, p7.x, ha, ka)),
                  vec4<f32>(sum8h(p0.y, p1.y, p2.y, p3.y, p4.y, p5.y, p6.y, p7.y, ha, ka))),
              Two(vec4<f32>(sum8h(p0.x, p1.x, p2.x, p3.x, p4.x, p5.x, p6.x, p7.x, hb, kb)),
                  vec4<f32>(sum8h(p0.y, p1.y, p2.y, p3.y, p4.y, p5.y, p6.y, p7.y, hb, kb))));
}

fn step8(s: Pair, wa: W8, wb: W8, r: vec4<u32>, u: vec4<u32>) -> Pair {
  var o: Pair;
  o.a.m = wa.mn;
  o.b.m = wb.mn;
  o.a.l = s.a.l * wa.c + ((wa.p.x + wa.p.y) + (wa.p.z + wa.p.w)) + ((wa.q.x + wa.q.y) + (wa.q.z + wa.q.w));
  o.b.l = s.b.l * wb.c + ((wb.p.x + wb.p.y) + (wb.p.z + wb.p.w)) + ((wb.q.x + wb.q.y) + (wb.q.z + wb.q.w));
  let ha = vec4<f16>(wa.p);
  let ka = vec4<f16>(wa.q);
  let hb = vec4<f16>(wb.p);
  let kb = vec4<f16>(wb.q);
  var t = part8(r, u, 0u, ha, ka, hb, kb);
  o.a.o.v0 = s.a.o.v0 * wa.c + t.a.a;
  o.a.o.v1 = s.a.o.v1 * wa.c + t.a.b;
  o.b.o.v0 = s.b.o.v0 * wb.c + t.b.a;
  o.b.o.v1 = s.b.o.v1 * wb.c + t.b.b;
#ifdef LANE_16_DIMS
  t = part8(r, u, 1u, ha, ka, hb, kb);
  o.a.o.v2 = s.a.o.v2 * wa.c + t.a.a;
  o.a.o.v3 = s.a.o.v3 * wa.c + t.a.b;
  o.b.o.v2 = s.b.o.v2 * wb.c + t.b.a;
  o.b.o.v3 = s.b.o.v3 * wb.c + t.b.b;
#endif
#ifdef LANE_32_DIMS
  t = part8(r, u, 2u, ha, ka, hb, kb);
  o.a.o.v4 = s.a.o.v4 * wa.c + t.a.a;
  o.a.o.v5 = s.a.o.v5 * wa.c + t.a.b;
  o.b.o.v4 = s.b.o.v4 * wb.c + t.b.a;
  o.b.o.v5 = s.b.o.v5 * wb.c + t.b.b;
  t = part8(r, u, 3u, ha, ka, hb, kb);
  o.a.o.v6 = s.a.o.v6 * wa.c + t.a.a;
  o.a.o.v7 = s.a.o.v7 * wa.c + t.a.b;
  o.b.o.v6 = s.b.o.v6 * wb.c + t.b.a;
  o.b.o.v7 = s.b.o.v7 * wb.c + t.b.b;
#endif
  return o;
}
#else
// Four keys per step: each query vector's state (its 4·NV4 dims of o) is rescaled once per four keys.
// V tile reader of the f32 tile.
fn vrow(b: u32, j: u32) -> Two { return Two(vs[b + 2u * j], vs[b + 2u * j + 1u]); }

// New max, rescale of the old state, and the four keys' weights (masked keys score −3e38: weight 0).
struct W4 { mn: f32, c: f32, p: vec4<f32> }

fn weights4(m: f32, d: vec4<f32>) -> W4 {
  let mn = max(m, max(max(d.x, d.y), max(d.z, d.w)));
  return W4(mn, exp(m - mn), exp(d - vec4<f32>(mn)));
}

// Both vectors' new max and sum of weights (their o is set by the step).
fn ml4(s: Pair, wa: W4, wb: W4) -> Pair {
  var r: Pair;
  r.a.m = wa.mn;
  r.b.m = wb.mn;
  r.a.l = s.a.l * wa.c + (wa.p.x + wa.p.y) + (wa.p.z + wa.p.w);
  r.b.l = s.b.l * wb.c + (wb.p.x + wb.p.y) + (wb.p.z + wb.p.w);
  return r;
}

fn upd4(o: vec4<f32>, w: W4, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>) -> vec4<f32> {
  return o * w.c + w.p.x * x0 + w.p.y * x1 + w.p.z * x2 + w.p.w * x3;
}

// Adds four keys (V rows at padded indices r0..r3) to both query vectors' states.
fn step4(s: Pair, wa: W4, wb: W4, r0: u32, r1: u32, r2: u32, r3: u32) -> Pair {
  var r = ml4(s, wa, wb);
  var x0 = vrow(r0, 0u);
  var x1 = vrow(r1, 0u);
  var x2 = vrow(r2, 0u);
  var x3 = vrow(r3, 0u);
  r.a.o.v0 = upd4(s.a.o.v0, wa, x0.a, x1.a, x2.a, x3.a);
  r.b.o.v0 = upd4(s.b.o.v0, wb, x0.a, x1.a, x2.a, x3.a);
  r.a.o.v1 = upd4(s.a.o.v1, wa, x0.b, x1.b, x2.b, x3.b);
  r.b.o.v1 = upd4(s.b.o.v1, wb, x0.b, x1.b, x2.b, x3.b);
#ifdef LANE_16_DIMS
  x0 = vrow(r0, 1u);
  x1 = vrow(r1, 1u);
  x2 = vrow(r2, 1u);
  x3 = vrow(r3, 1u);
  r.a.o.v2 = upd4(s.a.o.v2, wa, x0.a, x1.a, x2.a, x3.a);
  r.b.o.v2 = upd4(s.b.o.v2, wb, x0.a, x1.a, x2.a, x3.a);
  r.a.o.v3 = upd4(s.a.o.v3, wa, x0.b, x1.b, x2.b, x3.b);
  r.b.o.v3 = upd4(s.b.o.v3, wb, x0.b, x1.b, x2.b, x3.b);
#endif
#ifdef LANE_32_DIMS
  x0 = vrow(r0, 2u);
  x1 = vrow(r1, 2u);
  x2 = vrow(r2, 2u);
  x3 = vrow(r3, 2u);
  r.a.o.v4 = upd4(s.a.o.v4, wa, x0.a, x1.a, x2.a, x3.a);
  r.b.o.v4 = upd4(s.b.o.v4, wb, x0.a, x1.a, x2.a, x3.a);
  r.a.o.v5 = upd4(s.a.o.v5, wa, x0.b, x1.b, x2.b, x3.b);
  r.b.o.v5 = upd4(s.b.o.v5, wb, x0.b, x1.b, x2.b, x3.b);
  x0 = vrow(r0, 3u);
  x1 = vrow(r1, 3u);
  x2 = vrow(r2, 3u);
  x3 = vrow(r3, 3u);
  r.a.o.v6 = upd4(s.a.o.v6, wa, x0.a, x1.a, x2.a, x3.a);
  r.b.o.v6 = upd4(s.b.o.v6, wb, x0.a, x1.a, x2.a, x3.a);
  r.a.o.v7 = upd4(s.a.o.v7, wa, x0.b, x1.b, x2.b, x3.b);
  r.b.o.v7 = upd4(s.b.o.v7, wb, x0.b, x1.b, x2.b, x3.b);
#endif
  return r;
}
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
#ifdef F16_PV
  return t * PRS + off;
#else
  return t * RS + off;
#endif
}

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
  let k0 = first_tile(first.pos);

  // This lane group's two query vectors: vector v = grp and grp + QV, each position i = v / G, head
  // g = v % G (vectors past BQ·G are idle but keep step). Two per group: each K/V value read from
  // workgroup memory feeds both.
  let grp = lid / L;
  let lane = lid % L;
  let b = lane * NV4;              // first vec4 of this lane's dims
#ifdef F16_PV
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
#ifdef INT8_QK
  let qa = qquant(qload(rowa * nq * HD + qha * HD + b * 4u, params.scale));
  let qb = qquant(qload(rowb * nq * HD + qhb * HD + b * 4u, params.scale));
#else
  let qa = qload(rowa * nq * HD + qha * HD + b * 4u, params.scale);
  let qb = qload(rowb * nq * HD + qhb * HD + b * 4u, params.scale);
#endif

  var st: Pair;
  st.a.m = M0;
  st.b.m = M0;
#ifdef PREFETCH_TILES
  var pf = pf_load(lid, k0, min(BK, kmax - k0), prow, pstride, h);
#endif
  for (var kt = k0; kt < kmax; kt += BK) {
    let nk = min(BK, kmax - kt);
#ifdef PREFETCH_TILES
    pf_store(lid, pf);
    workgroupBarrier();
    if (kt + BK < kmax) { pf = pf_load(lid, kt + BK, min(BK, kmax - kt - BK), prow, pstride, h); }
#else
    load_tile(lid, kt, nk, prow, pstride, h);
    workgroupBarrier();
#endif
    // (The step loops stay inline: as functions of the state they ran slower.)
#ifdef F16_PV
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
      // Causal (and window) mask and the pad keys of a tile whose length is not a multiple of 8: weight 0.
      let jl = vec4<u32>(kt + t) + vec4<u32>(0u, 1u, 2u, 3u);
      let jh = jl + vec4<u32>(4u);
      let okl = jl < vec4<u32>(kt + nk);
      let okh = jh < vec4<u32>(kt + nk);
      let neg = vec4<f32>(-3.0e38);
      let wa = weights8(st.a.m,
                        select(neg, vec4<f32>(d01.x, d01.z, d23.x, d23.z), okl & seen(jl, posa)),
                        select(neg, vec4<f32>(d45.x, d45.z, d67.x, d67.z), okh & seen(jh, posa)));
      let wb = weights8(st.b.m,
                        select(neg, vec4<f32>(d01.y, d01.w, d23.y, d23.w), okl & seen(jl, posb)),
                        select(neg, vec4<f32>(d45.y, d45.w, d67.y, d67.w), okh & seen(jh, posb)));
      st = step8(st, wa, wb, r, u);
    }
#else
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
      // Causal (and window) mask and the pad keys of a tile whose length is not a multiple of 4: weight 0.
      let j = kt + t;
      let ok = vec4<bool>(true, t + 1u < nk, t + 2u < nk, t + 3u < nk);
      let jj = vec4<u32>(j, j + 1u, j + 2u, j + 3u);
      let neg = vec4<f32>(-3.0e38);
      let wa = weights4(st.a.m,
                        select(neg, vec4<f32>(d01.x, d01.z, d23.x, d23.z), ok & seen(jj, posa)));
      let wb = weights4(st.b.m,
                        select(neg, vec4<f32>(d01.y, d01.w, d23.y, d23.w), ok & seen(jj, posb)));
      st = step4(st, wa, wb, r0, r1, r2, r3);
    }
#endif
    workgroupBarrier();
  }
  if (va < nqb * G) { emit(rowa, qha, b, st.a); }
  if (vb < nqb * G) { emit(rowb, qhb, b, st.b); }
}

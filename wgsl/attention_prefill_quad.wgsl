// Causal attention for a prefill segment, as attention_prefill.wgsl computes it (same bindings, params,
// grid, tiles and WINDOW: lib/prefill.wgsl), for head dims 128 (HEAD_DIM_128) and 64 on f16 P·V (F16_PV
// with F16_TILES or INT8_QK) with subgroups: a group of L = HD/16 lanes holds FOUR query vectors, 16 dims
// of each per lane, so every 16-byte K or V read from workgroup memory feeds four vectors (the two-vector
// kernel: two), and an f16 K word is unpacked once for four. Eight keys per step, keys grouped from
// multiples of eight, P·V summed in f16 per eight.
// The group's partial dots (4 vectors × 8 keys per lane) are summed by a reduce-scatter over the lane bits
// (R1, R2 and with HEAD_DIM_128 R3 below: 16 + 8 + 4 shuffles, where a butterfly takes 96), which leaves each
// lane one vector's (w) scores: for one half of the keys (HEAD_DIM_128: b0) or all eight. The lane runs that
// vector's online softmax over them (4 exps with HEAD_DIM_128, where every lane took 16), and the weights
// and the rescale are gathered back (R3, R2, R1) for P·V. A lane orders its own vectors and keys so that
// each round keeps its low slots and sends its high ones, so no selects are needed:
//   vector slot s = query vector grp + (s ^ w)·QV;   key slot k (of 8) = key t + 4·((k / 4) ^ b0) + k % 4.
// Per-lane state is transposed: Blk.x holds one dim for the four vector slots, so q·k and P·V are vec4
// FMAs over vectors. The tiles are rows of H8 16-byte units without padding, units swizzled (at(): unit
// d8 ^ bit 3 of d8) so that the 8 lanes of a quarter-warp read 8 distinct bank groups.
// Grid: (ceil(S / BQ), nkv); 256 lanes, BQ positions × the G query heads of one kv head per workgroup.
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

override PRS: u32 = H8;                 // 16-byte units per tile row (unpadded, swizzled)
// Position of 16-byte unit d8 of tile row t: the lanes of a quarter-warp read units 2ℓ + j of rows four
// apart; flipping bit 0 by bit 3 puts them in 8 distinct bank groups.
fn at(t: u32, d8: u32) -> u32 { return t * PRS + (d8 ^ ((d8 >> 3u) & 1u)); }

// Four dims (x .. w) of this lane's slice, each a vec4 over the four vector slots.
struct Blk { x: vec4<f32>, y: vec4<f32>, z: vec4<f32>, w: vec4<f32> }
// The lane's 16 dims.
struct Quad { b0: Blk, b1: Blk, b2: Blk, b3: Blk }
// The same in f16 (F16_QK's q·scale).
struct BlkH { x: vec4<f16>, y: vec4<f16>, z: vec4<f16>, w: vec4<f16> }
struct QuadH { b0: BlkH, b1: BlkH, b2: BlkH, b3: BlkH }
// Eight keys' weights, each a vec4<f16> over the vector slots (key slots 0..7).
struct P8 {
  k0: vec4<f16>, k1: vec4<f16>, k2: vec4<f16>, k3: vec4<f16>,
  k4: vec4<f16>, k5: vec4<f16>, k6: vec4<f16>, k7: vec4<f16>,
}

// Lane bits of the rounds: R1 halves the vector slots, R2 halves them again, R3 (HEAD_DIM_128: 8 lanes) the
// keys; with HD 64 (4 lanes) a lane keeps its vector's eight keys. INT8_QK: R1 = 1, so the first round pairs
// the two lanes of one 32-dim scale block and adds integers.
#ifdef HEAD_DIM_128
#ifdef INT8_QK
const R1: u32 = 1u;
const R2: u32 = 4u;
const R3: u32 = 2u;
#else
const R1: u32 = 4u;
const R2: u32 = 2u;
const R3: u32 = 1u;
#endif
fn lane_half(lane: u32) -> u32 { return select(0u, 1u, (lane & R3) != 0u); }
#else
#ifdef INT8_QK
const R1: u32 = 1u;
const R2: u32 = 2u;
#else
const R1: u32 = 2u;
const R2: u32 = 1u;
#endif
fn lane_half(lane: u32) -> u32 { return 0u; }
#endif
// The lane's vector w (bit 1 from R1, bit 0 from R2).
fn lane_w(lane: u32) -> u32 { return select(0u, 2u, (lane & R1) != 0u) | select(0u, 1u, (lane & R2) != 0u); }

alias wt = vec4<f16>;   // weights gathered as f16 (half the shuffle payload)

fn blk(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>) -> Blk {
  return Blk(vec4<f32>(a.x, b.x, c.x, d.x), vec4<f32>(a.y, b.y, c.y, d.y), vec4<f32>(a.z, b.z, c.z, d.z),
             vec4<f32>(a.w, b.w, c.w, d.w));
}

#ifdef INT8_QK
// A lane's 16 dims of four vectors as codes (vector slot s: w.s), and their block scales: a scale block of
// 32 dims spans this lane and its partner across lane bit 0, so its max comes through one shuffle.
struct Q4 { a: vec4<u32>, b: vec4<u32>, c: vec4<u32>, d: vec4<u32>, s: vec4<f32> }
fn amax16(h: Hv) -> f32 {
  let m = max(max(abs(h.v0), abs(h.v1)), max(abs(h.v2), abs(h.v3)));
  return max(max(m.x, m.y), max(m.z, m.w));
}
fn qc16(h: Hv, inv: f32) -> vec4<u32> {
  return vec4<u32>(kv8_pack(h.v0, inv), kv8_pack(h.v1, inv), kv8_pack(h.v2, inv), kv8_pack(h.v3, inv));
}
fn qprep(a: Hv, b: Hv, c: Hv, d: Hv) -> Q4 {
  let m = vec4<f32>(amax16(a), amax16(b), amax16(c), amax16(d));
  let o = subgroupShuffleXor(m, 1u);
  // The partner across lane bit 0 holds vector slot s at its slot s ^ 2 (lane bit 0 is R1).
  let am = max(m, o.zwxy);
  return Q4(qc16(a, kv8_inv(am.x)), qc16(b, kv8_inv(am.y)), qc16(c, kv8_inv(am.z)), qc16(d, kv8_inv(am.w)),
            am / 127.0);
}
fn idot4(a: vec4<u32>, k: vec4<u32>) -> i32 {
  return (dot4I8Packed(a.x, k.x) + dot4I8Packed(a.y, k.y)) +
         (dot4I8Packed(a.z, k.z) + dot4I8Packed(a.w, k.w));
}
// Partial integer scores of the four vector slots with key row t of the tile: summed with the b0 partner
// first (same scale block), then scaled once: half the conversions and multiplies.
fn qk4(q: Q4, t: u32, lane: u32, c0: u32, c1: u32) -> vec4<i32> {
  let k = kq[t * H16 + lane];
  return vec4<i32>(idot4(q.a, k), idot4(q.b, k), idot4(q.c, k), idot4(q.d, k));
}
fn round1(e: vec4<i32>, q: Q4, t: u32, lane: u32) -> vec2<f32> {
  return vec2<f32>(e.xy + subgroupShuffleXor(e.zw, R1)) * (q.s.xy * ksc[t * NB + lane / 2u]);
}
#elif F16_QK
// F16_QK (f16 cache): q·scale and the K tile as f16, each vector's 16 dims of the lane summed as two chains
// of eight f16 FMAs in dim order (8 packed FMAs per key and vector instead of 16 f32), each then to f32. Each
// FMA rounds to f16: the check's reference sums its scores alike (qkF16 in src/lab/ref/attention.ts). One
// chain of sixteen doubles the error, past the f16 tolerance on sharp attention. Range: |q·scale·k| summed
// over 8 dims stays far below f16's 65504 for normed heads
// (Qwen3's q/k norms) and typical unnormed ones (|q·scale| ≲ 5, |k| ≲ 500).
alias Q4 = QuadH;
fn blkh(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>) -> BlkH {
  let t = blk(a, b, c, d);
  return BlkH(vec4<f16>(t.x), vec4<f16>(t.y), vec4<f16>(t.z), vec4<f16>(t.w));
}
fn qprep(a: Hv, b: Hv, c: Hv, d: Hv) -> Q4 {
  return Q4(blkh(a.v0, b.v0, c.v0, d.v0), blkh(a.v1, b.v1, c.v1, d.v1), blkh(a.v2, b.v2, c.v2, d.v2),
            blkh(a.v3, b.v3, c.v3, d.v3));
}
fn fkh(q: BlkH, k: vec4<f16>, e: vec4<f16>) -> vec4<f16> {
  return fma(q.w, vec4<f16>(k.w), fma(q.z, vec4<f16>(k.z), fma(q.y, vec4<f16>(k.y),
         fma(q.x, vec4<f16>(k.x), e))));
}
fn qk4(q: Q4, t: u32, lane: u32, c0: u32, c1: u32) -> vec4<f32> {
  let x = ks[t * PRS + c0];
  let y = ks[t * PRS + c1];
  return vec4<f32>(fkh(q.b1, x.y, fkh(q.b0, x.x, vec4<f16>(0.0)))) +
         vec4<f32>(fkh(q.b3, y.y, fkh(q.b2, y.x, vec4<f16>(0.0))));
}
#else
alias Q4 = Quad;
fn qprep(a: Hv, b: Hv, c: Hv, d: Hv) -> Quad {
  return Quad(blk(a.v0, b.v0, c.v0, d.v0), blk(a.v1, b.v1, c.v1, d.v1), blk(a.v2, b.v2, c.v2, d.v2),
              blk(a.v3, b.v3, c.v3, d.v3));
}
fn fk(q: Blk, k: vec4<f32>, e: vec4<f32>) -> vec4<f32> {
  return fma(q.w, vec4<f32>(k.w), fma(q.z, vec4<f32>(k.z), fma(q.y, vec4<f32>(k.y),
         fma(q.x, vec4<f32>(k.x), e))));
}
// Partial scores of the four vector slots with key row t (one chain of 16 FMAs each; the 32 chains of a
// step are independent).
fn qk4(q: Quad, t: u32, lane: u32, c0: u32, c1: u32) -> vec4<f32> {
  let x = ks[t * PRS + c0];
  let y = ks[t * PRS + c1];
  return fk(q.b3, hi8(y), fk(q.b2, lo8(y), fk(q.b1, hi8(x), fk(q.b0, lo8(x), vec4<f32>(0.0)))));
}
#endif
#ifndef INT8_QK
fn round1(e: vec4<f32>, q: Q4, t: u32, lane: u32) -> vec2<f32> { return e.xy + subgroupShuffleXor(e.zw, R1); }
#endif

// Four dims of P·V over eight keys (V values v_k: those dims of key slot k) for the four vector slots: per
// dim, Σ_k p_k · v_k as an f16 chain in key order (as sum8h), then into the f32 state after its rescale c.
fn pv4(p: P8, v0: vec4<f16>, v1: vec4<f16>, v2: vec4<f16>, v3: vec4<f16>, v4: vec4<f16>, v5: vec4<f16>,
       v6: vec4<f16>, v7: vec4<f16>, o: Blk, c: vec4<f32>) -> Blk {
  let x = fma(p.k7, vec4<f16>(v7.x), fma(p.k6, vec4<f16>(v6.x), fma(p.k5, vec4<f16>(v5.x),
          fma(p.k4, vec4<f16>(v4.x), fma(p.k3, vec4<f16>(v3.x), fma(p.k2, vec4<f16>(v2.x),
          fma(p.k1, vec4<f16>(v1.x), p.k0 * vec4<f16>(v0.x))))))));
  let y = fma(p.k7, vec4<f16>(v7.y), fma(p.k6, vec4<f16>(v6.y), fma(p.k5, vec4<f16>(v5.y),
          fma(p.k4, vec4<f16>(v4.y), fma(p.k3, vec4<f16>(v3.y), fma(p.k2, vec4<f16>(v2.y),
          fma(p.k1, vec4<f16>(v1.y), p.k0 * vec4<f16>(v0.y))))))));
  let z = fma(p.k7, vec4<f16>(v7.z), fma(p.k6, vec4<f16>(v6.z), fma(p.k5, vec4<f16>(v5.z),
          fma(p.k4, vec4<f16>(v4.z), fma(p.k3, vec4<f16>(v3.z), fma(p.k2, vec4<f16>(v2.z),
          fma(p.k1, vec4<f16>(v1.z), p.k0 * vec4<f16>(v0.z))))))));
  let w = fma(p.k7, vec4<f16>(v7.w), fma(p.k6, vec4<f16>(v6.w), fma(p.k5, vec4<f16>(v5.w),
          fma(p.k4, vec4<f16>(v4.w), fma(p.k3, vec4<f16>(v3.w), fma(p.k2, vec4<f16>(v2.w),
          fma(p.k1, vec4<f16>(v1.w), p.k0 * vec4<f16>(v0.w))))))));
  return Blk(o.x * c + vec4<f32>(x), o.y * c + vec4<f32>(y), o.z * c + vec4<f32>(z), o.w * c + vec4<f32>(w));
}

// P·V of one step into the state: this lane's two 8-dim units (positions c0, c1 in a row) of the eight V
// rows rl (key slots 0..3), rh (4..7).
fn pv(o: Quad, p: P8, rl: vec4<u32>, rh: vec4<u32>, c0: u32, c1: u32, c: vec4<f32>) -> Quad {
  var r: Quad;
  var a0 = vh(rl.x + c0); var a1 = vh(rl.y + c0); var a2 = vh(rl.z + c0); var a3 = vh(rl.w + c0);
  var a4 = vh(rh.x + c0); var a5 = vh(rh.y + c0); var a6 = vh(rh.z + c0); var a7 = vh(rh.w + c0);
  r.b0 = pv4(p, a0.x, a1.x, a2.x, a3.x, a4.x, a5.x, a6.x, a7.x, o.b0, c);
  r.b1 = pv4(p, a0.y, a1.y, a2.y, a3.y, a4.y, a5.y, a6.y, a7.y, o.b1, c);
  a0 = vh(rl.x + c1); a1 = vh(rl.y + c1); a2 = vh(rl.z + c1); a3 = vh(rl.w + c1);
  a4 = vh(rh.x + c1); a5 = vh(rh.y + c1); a6 = vh(rh.z + c1); a7 = vh(rh.w + c1);
  r.b2 = pv4(p, a0.x, a1.x, a2.x, a3.x, a4.x, a5.x, a6.x, a7.x, o.b2, c);
  r.b3 = pv4(p, a0.y, a1.y, a2.y, a3.y, a4.y, a5.y, a6.y, a7.y, o.b3, c);
  return r;
}

// Query vector of vector slot s for this lane: (row, head), its position, and whether it is a real vector.
struct Vq { row: u32, qh: u32, pos: u32, real: bool }
fn vq(grp: u32, s: u32, w: u32, i0: u32, nqb: u32, h: u32) -> Vq {
  let v = grp + (s ^ w) * QV;
  let row = params.row0 + i0 + min(v / G, nqb - 1u);
  return Vq(row, h * G + v % G, rows[row].pos, v < nqb * G);
}

// This lane's 16 dims of the vector's query (and of its output row).
fn qat(q: Vq, lane: u32) -> u32 { return q.row * params.nq * HD + q.qh * HD + lane * 16u; }

fn emit4(q: Vq, lane: u32, o: Quad, s: u32, inv: f32) {
  let ob = qat(q, lane);
  let w = array<vec4<f32>, 4>(blkcol(o.b0, s), blkcol(o.b1, s), blkcol(o.b2, s), blkcol(o.b3, s));
  for (var k = 0u; k < 4u; k++) {
    for (var c = 0u; c < 4u; c++) { out[ob + k * 4u + c] = w[k][c] * inv; }
  }
}
// Vector slot s's four dims of a Blk.
fn blkcol(b: Blk, s: u32) -> vec4<f32> { return vec4<f32>(b.x[s], b.y[s], b.z[s], b.w[s]); }

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.y;
  let i0 = wid.x * BQ;
  let nqb = min(BQ, params.S - i0);
  let pstride = 2u * params.nkv * params.ps * HD;
  let prow = rows[params.row0 + i0].slot * params.max_pages;
  let kmax = rows[params.row0 + i0 + nqb - 1u].pos + 1u;
  let k0 = first_tile(rows[params.row0 + i0].pos);
  let grp = lid / L;
  let lane = lid % L;
  let b0 = lane_half(lane);
  let w = lane_w(lane);
  // This lane's two 8-dim units (2·lane, 2·lane + 1) at their swizzled positions in a row.
  let c0 = at(0u, 2u * lane);
  let c1 = at(0u, 2u * lane + 1u);
  let v0 = vq(grp, 0u, w, i0, nqb, h);
  let v1 = vq(grp, 1u, w, i0, nqb, h);
  let v2 = vq(grp, 2u, w, i0, nqb, h);
  let v3 = vq(grp, 3u, w, i0, nqb, h);
  let q = qprep(qload(qat(v0, lane), params.scale), qload(qat(v1, lane), params.scale),
                qload(qat(v2, lane), params.scale), qload(qat(v3, lane), params.scale));
  var o: Quad;
  var m = M0;  // vector slot 0's running max and (this lane's key half of) its sum
  var l = 0.0;
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
    for (var t = 0u; t < nk; t += 8u) {
      // Key slots 0..3 and 4..7 (pad keys past the tile clamped to its last: masked below).
      let t0 = t + 4u * b0;
      let tl = min(vec4<u32>(t0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(nk - 1u));
      let th = min(vec4<u32>(t + 4u - 4u * b0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(nk - 1u));
      // Partial scores, each a vec4 over the vector slots, then the reduce-scatter: keep slots 0–1, send 2–3
      // (R1); keep 0, send 1 (R2); HEAD_DIM_128: keep key slots 0–3, send 4–7 (R3).
      var e0 = qk4(q, tl.x, lane, c0, c1);
      var e1 = qk4(q, tl.y, lane, c0, c1);
      var e2 = qk4(q, tl.z, lane, c0, c1);
      var e3 = qk4(q, tl.w, lane, c0, c1);
      var e4 = qk4(q, th.x, lane, c0, c1);
      var e5 = qk4(q, th.y, lane, c0, c1);
      var e6 = qk4(q, th.z, lane, c0, c1);
      var e7 = qk4(q, th.w, lane, c0, c1);
      let f01 = vec4<f32>(round1(e0, q, tl.x, lane), round1(e1, q, tl.y, lane));
      let f23 = vec4<f32>(round1(e2, q, tl.z, lane), round1(e3, q, tl.w, lane));
      let f45 = vec4<f32>(round1(e4, q, th.x, lane), round1(e5, q, th.y, lane));
      let f67 = vec4<f32>(round1(e6, q, th.z, lane), round1(e7, q, th.w, lane));
      let g03 = vec4<f32>(f01.x, f01.z, f23.x, f23.z) +
                subgroupShuffleXor(vec4<f32>(f01.y, f01.w, f23.y, f23.w), R2);
      let g47 = vec4<f32>(f45.x, f45.z, f67.x, f67.z) +
                subgroupShuffleXor(vec4<f32>(f45.y, f45.w, f67.y, f67.w), R2);
      let neg = vec4<f32>(-3.0e38);
      let j = vec4<u32>(t0) + vec4<u32>(0u, 1u, 2u, 3u);
#ifdef HEAD_DIM_128
      // Vector slot 0's scores for keys t0 .. t0+3: causal (window) mask and pad keys (weight 0).
      let sc = select(neg, g03 + subgroupShuffleXor(g47, R3),
                      (j < vec4<u32>(nk)) & seen(j + vec4<u32>(kt), v0.pos));
      var mx = max(max(sc.x, sc.y), max(sc.z, sc.w));
      mx = max(mx, subgroupShuffleXor(mx, R3));
#else
      // Vector slot 0's scores for keys t .. t+7.
      let sc = select(neg, g03, (j < vec4<u32>(nk)) & seen(j + vec4<u32>(kt), v0.pos));
      let jh = j + vec4<u32>(4u);
      let sh = select(neg, g47, (jh < vec4<u32>(nk)) & seen(jh + vec4<u32>(kt), v0.pos));
      let x = max(sc, sh);
      let mx = max(max(x.x, x.y), max(x.z, x.w));
#endif
      let mn = max(m, mx);
      let c = exp(m - mn);
      let p = exp(sc - vec4<f32>(mn));
      // Gather: key slots 4..7 of vector slot 0 (HEAD_DIM_128: from R3), then vector slot 1 (R2), 2–3 (R1).
#ifdef HEAD_DIM_128
      l = l * c + ((p.x + p.y) + (p.z + p.w));
      let pa = wt(p);
      let pb = subgroupShuffleXor(pa, R3);
#else
      let ph = exp(sh - vec4<f32>(mn));
      l = l * c + (((p.x + p.y) + (p.z + p.w)) + ((ph.x + ph.y) + (ph.z + ph.w)));
      let pa = wt(p);
      let pb = wt(ph);
#endif
      m = mn;
      let pa1 = subgroupShuffleXor(pa, R2);
      let pb1 = subgroupShuffleXor(pb, R2);
      let c1s = subgroupShuffleXor(c, R2);
      let pa2 = subgroupShuffleXor(pa, R1);
      let pb2 = subgroupShuffleXor(pb, R1);
      let pa3 = subgroupShuffleXor(pa1, R1);
      let pb3 = subgroupShuffleXor(pb1, R1);
      let cv = vec4<f32>(c, c1s, subgroupShuffleXor(c, R1), subgroupShuffleXor(c1s, R1));
      let pw = P8(vec4<f16>(wt(pa.x, pa1.x, pa2.x, pa3.x)), vec4<f16>(wt(pa.y, pa1.y, pa2.y, pa3.y)),
                  vec4<f16>(wt(pa.z, pa1.z, pa2.z, pa3.z)), vec4<f16>(wt(pa.w, pa1.w, pa2.w, pa3.w)),
                  vec4<f16>(wt(pb.x, pb1.x, pb2.x, pb3.x)), vec4<f16>(wt(pb.y, pb1.y, pb2.y, pb3.y)),
                  vec4<f16>(wt(pb.z, pb1.z, pb2.z, pb3.z)), vec4<f16>(wt(pb.w, pb1.w, pb2.w, pb3.w)));
      o = pv(o, pw, tl * PRS, th * PRS, c0, c1, cv);
    }
    workgroupBarrier();
  }
  // Full sums: both key halves (HEAD_DIM_128), then the other vector slots' (R2, R1).
#ifdef HEAD_DIM_128
  let lf = l + subgroupShuffleXor(l, R3);
#else
  let lf = l;
#endif
  let l1 = subgroupShuffleXor(lf, R2);
  let inv = 1.0 / vec4<f32>(lf, l1, subgroupShuffleXor(lf, R1), subgroupShuffleXor(l1, R1));
  if (v0.real) { emit4(v0, lane, o, 0u, inv.x); }
  if (v1.real) { emit4(v1, lane, o, 1u, inv.y); }
  if (v2.real) { emit4(v2, lane, o, 2u, inv.z); }
  if (v3.real) { emit4(v3, lane, o, 3u, inv.w); }
}

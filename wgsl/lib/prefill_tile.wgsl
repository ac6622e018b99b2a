// Tile loads of the prefill attention kernels (after lib/prefill.wgsl): keys kt .. kt+BK−1 (clamped to the
// last key: pad rows are masked) into the K/V tiles, by units of one fetch and one put per tile format,
// shared by the plain loop (load_tile: load, then the caller's barrier) and PREFETCH_TILES (pf_load and
// pf_store).
//  F16_TILES:         unit e < BK·H8: 8 dims of K and of V as f16 words (row e / H8); K kept as words
//                     (F16_QK: as f16 values), V as f16 values (vput);
//  INT8_QK + F16_PV:  K as codes (k8_unit, k8_scale: lib/prefill_qk8.wgsl), V unit e < BK·H8: 8 codes and
//                     their scale, dequantized and rounded to f16 (vput);
//  otherwise:         K (not under INT8_QK) and V as f32 (ld4), unit e < BK·H4: one vec4.
// PREFETCH_TILES: the next tile's units are loaded into registers while this tile is computed and stored
// after the barrier that ends it, so a tile's load latency is not spent waiting between barriers. Unit
// e = lid + i·WG, at most 4 per lane (PREFETCH_UNITS of K, PREFETCH_V_UNITS of V). Same words, same places.

#ifdef F16_TILES
struct Kv { k: vec4<u32>, v: vec4<u32> }
fn kv_unit(e: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> Kv {
  let base = key_row(prow, pstride, h, kt + min(e / H8, nk - 1u)) / 8u + e % H8;
  return Kv(kv[base], kv[base + params.nkv * params.ps * HD / 8u]);
}
fn kv_put(e: u32, k: vec4<u32>, v: vec4<u32>) {
  if (e >= BK * H8) { return; }
  let i = at(e / H8, e % H8);
#ifdef F16_QK
  ks[i] = Hh(vec4<f16>(lo8(k)), vec4<f16>(hi8(k)));
#else
  ks[i] = k;
#endif
  vput(i, lo8(v), hi8(v));
}
#elif F16_PV
struct V8 { w: vec2<u32>, s: f32 }
fn v8_unit(e: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> V8 {
  let c = key_row(prow, pstride, h, kt + min(e / H8, nk - 1u)) + params.nkv * params.ps * HD + (e % H8) * 8u;
  return V8(vec2<u32>(kv[c / 4u], kv[c / 4u + 1u]), kvs[c / QB]);
}
fn v8_put(e: u32, w: vec2<u32>, s: f32) {
  if (e < BK * H8) { vput(at(e / H8, e % H8), kv8_unpack(w.x, s), kv8_unpack(w.y, s)); }
}
#endif

fn load_tile(lid: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) {
#ifdef F16_TILES
  for (var e = lid; e < BK * H8; e += WG) {
    let u = kv_unit(e, kt, nk, prow, pstride, h);
    kv_put(e, u.k, u.v);
  }
#else
#ifdef INT8_QK
  load_k8(lid, kt, nk, prow, pstride, h);
#endif
#ifdef F16_PV
  for (var e = lid; e < BK * H8; e += WG) {
    let u = v8_unit(e, kt, nk, prow, pstride, h);
    v8_put(e, u.w, u.s);
  }
#else
  for (var e = lid; e < BK * H4; e += WG) {
    let t = e / H4;
    let d4 = e % H4;
    let base = key_row(prow, pstride, h, kt + min(t, nk - 1u)) + d4 * 4u;
#ifndef INT8_QK
    ks[at(t, d4)] = ld4(base);
#endif
    vs[at(t, d4)] = ld4(base + params.nkv * params.ps * HD);
  }
#endif
#endif
}

#ifdef PREFETCH_TILES
#ifdef F16_TILES
const NPF: u32 = {{PREFETCH_UNITS}}u;
struct Pf {
  k0: vec4<u32>, v0: vec4<u32>, k1: vec4<u32>, v1: vec4<u32>,
  k2: vec4<u32>, v2: vec4<u32>, k3: vec4<u32>, v3: vec4<u32>,
}

fn pf_load(lid: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> Pf {
  var p: Pf;
  if (lid < BK * H8) {
    let u = kv_unit(lid, kt, nk, prow, pstride, h); p.k0 = u.k; p.v0 = u.v;
  }
  if (NPF > 1u && lid + WG < BK * H8) {
    let u = kv_unit(lid + WG, kt, nk, prow, pstride, h); p.k1 = u.k; p.v1 = u.v;
  }
  if (NPF > 2u && lid + 2u * WG < BK * H8) {
    let u = kv_unit(lid + 2u * WG, kt, nk, prow, pstride, h); p.k2 = u.k; p.v2 = u.v;
  }
  if (NPF > 3u && lid + 3u * WG < BK * H8) {
    let u = kv_unit(lid + 3u * WG, kt, nk, prow, pstride, h); p.k3 = u.k; p.v3 = u.v;
  }
  return p;
}

fn pf_store(lid: u32, p: Pf) {
  kv_put(lid, p.k0, p.v0);
  if (NPF > 1u) { kv_put(lid + WG, p.k1, p.v1); }
  if (NPF > 2u) { kv_put(lid + 2u * WG, p.k2, p.v2); }
  if (NPF > 3u) { kv_put(lid + 3u * WG, p.k3, p.v3); }
}
#else
// INT8_QK + F16_PV: NPF K code units and one K scale per lane, NPV V units.
const NPF: u32 = {{PREFETCH_UNITS}}u;
const NPV: u32 = {{PREFETCH_V_UNITS}}u;
struct Pf {
  k0: vec4<u32>, k1: vec4<u32>, s: f32,
  v0: vec2<u32>, v1: vec2<u32>, v2: vec2<u32>, v3: vec2<u32>, vs: vec4<f32>,
}

fn pf_load(lid: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> Pf {
  var p: Pf;
  if (lid < BK * H16) { p.k0 = k8_unit(lid, kt, nk, prow, pstride, h); }
  if (NPF > 1u && lid + WG < BK * H16) { p.k1 = k8_unit(lid + WG, kt, nk, prow, pstride, h); }
  if (lid < BK * NB) { p.s = k8_scale(lid, kt, nk, prow, pstride, h); }
  if (lid < BK * H8) {
    let u = v8_unit(lid, kt, nk, prow, pstride, h); p.v0 = u.w; p.vs.x = u.s;
  }
  if (NPV > 1u && lid + WG < BK * H8) {
    let u = v8_unit(lid + WG, kt, nk, prow, pstride, h); p.v1 = u.w; p.vs.y = u.s;
  }
  if (NPV > 2u && lid + 2u * WG < BK * H8) {
    let u = v8_unit(lid + 2u * WG, kt, nk, prow, pstride, h); p.v2 = u.w; p.vs.z = u.s;
  }
  if (NPV > 3u && lid + 3u * WG < BK * H8) {
    let u = v8_unit(lid + 3u * WG, kt, nk, prow, pstride, h); p.v3 = u.w; p.vs.w = u.s;
  }
  return p;
}

fn pf_store(lid: u32, p: Pf) {
  if (lid < BK * H16) { kq[lid] = p.k0; }
  if (NPF > 1u && lid + WG < BK * H16) { kq[lid + WG] = p.k1; }
  if (lid < BK * NB) { ksc[lid] = p.s; }
  v8_put(lid, p.v0, p.vs.x);
  if (NPV > 1u) { v8_put(lid + WG, p.v1, p.vs.y); }
  if (NPV > 2u) { v8_put(lid + 2u * WG, p.v2, p.vs.z); }
  if (NPV > 3u) { v8_put(lid + 3u * WG, p.v3, p.vs.w); }
}
#endif
#endif

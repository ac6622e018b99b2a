// PF part of attention_prefill.wgsl (f16 cache, PACKED; or q8 with QK8 and HPV): the next tile's K/V words are loaded into
// registers while this tile is computed, and stored after the barrier that ends it, so a tile's load latency
// is not spent waiting between the tile's barriers (H200 4B chunk at depth 12k: −5%). Unit
// e = lid + i·WG of a tile: row e / H8, packed vec4 e % H8 of K and of V; NPF ≤ 4 units per lane. The same
// words reach the same places as PACKED's loop: same bits.
#ifdef PACKED
const NPF: u32 = {{NPF}}u;
struct Pf { k0: vec4<u32>, v0: vec4<u32>, k1: vec4<u32>, v1: vec4<u32>, k2: vec4<u32>, v2: vec4<u32>, k3: vec4<u32>, v3: vec4<u32> }
struct Kv { k: vec4<u32>, v: vec4<u32> }

fn pf_unit(e: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> Kv {
  let base = key_row(prow, pstride, h, kt + min(e / H8, nk - 1u)) / 8u + e % H8;
  return Kv(kv[base], kv[base + params.nkv * params.ps * HD / 8u]);
}

fn pf_load(lid: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> Pf {
  var p: Pf;
  if (lid < BK * H8) { let u = pf_unit(lid, kt, nk, prow, pstride, h); p.k0 = u.k; p.v0 = u.v; }
  if (NPF > 1u && lid + WG < BK * H8) { let u = pf_unit(lid + WG, kt, nk, prow, pstride, h); p.k1 = u.k; p.v1 = u.v; }
  if (NPF > 2u && lid + 2u * WG < BK * H8) { let u = pf_unit(lid + 2u * WG, kt, nk, prow, pstride, h); p.k2 = u.k; p.v2 = u.v; }
  if (NPF > 3u && lid + 3u * WG < BK * H8) { let u = pf_unit(lid + 3u * WG, kt, nk, prow, pstride, h); p.k3 = u.k; p.v3 = u.v; }
  return p;
}

fn pf_put(e: u32, k: vec4<u32>, v: vec4<u32>) {
  if (e >= BK * H8) { return; }
  let i = at(e / H8, e % H8);
  ks[i] = k;
  vs[i] = v;
}

fn pf_store(lid: u32, p: Pf) {
  pf_put(lid, p.k0, p.v0);
  if (NPF > 1u) { pf_put(lid + WG, p.k1, p.v1); }
  if (NPF > 2u) { pf_put(lid + 2u * WG, p.k2, p.v2); }
  if (NPF > 3u) { pf_put(lid + 3u * WG, p.k3, p.v3); }
}
#else
// QK8 with HPV (q8 cache): per tile, NPF K code units (4 words: 16 codes) and one scale per lane, and NPV V
// units (8 codes and their block's scale), dequantized and rounded to f16 when stored, as the plain loop does.
const NPF: u32 = {{NPF}}u;
const NPV: u32 = {{NPV}}u;
struct Pf { k0: vec4<u32>, k1: vec4<u32>, s: f32, v0: vec2<u32>, v1: vec2<u32>, v2: vec2<u32>, v3: vec2<u32>, vs: vec4<f32> }
struct V8 { w: vec2<u32>, s: f32 }

fn pf_k(e: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> vec4<u32> {
  let w = key_row(prow, pstride, h, kt + min(e / H16, nk - 1u)) / 4u + (e % H16) * 4u;
  return vec4<u32>(kv[w], kv[w + 1u], kv[w + 2u], kv[w + 3u]);
}

fn pf_v(e: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> V8 {
  let c = key_row(prow, pstride, h, kt + min(e / H8, nk - 1u)) + params.nkv * params.ps * HD + (e % H8) * 8u;
  return V8(vec2<u32>(kv[c / 4u], kv[c / 4u + 1u]), kvs[c / QB]);
}

fn pf_load(lid: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> Pf {
  var p: Pf;
  if (lid < BK * H16) { p.k0 = pf_k(lid, kt, nk, prow, pstride, h); }
  if (NPF > 1u && lid + WG < BK * H16) { p.k1 = pf_k(lid + WG, kt, nk, prow, pstride, h); }
  if (lid < BK * NB) { p.s = kvs[key_row(prow, pstride, h, kt + min(lid / NB, nk - 1u)) / 32u + lid % NB]; }
  if (lid < BK * H8) { let u = pf_v(lid, kt, nk, prow, pstride, h); p.v0 = u.w; p.vs.x = u.s; }
  if (NPV > 1u && lid + WG < BK * H8) { let u = pf_v(lid + WG, kt, nk, prow, pstride, h); p.v1 = u.w; p.vs.y = u.s; }
  if (NPV > 2u && lid + 2u * WG < BK * H8) { let u = pf_v(lid + 2u * WG, kt, nk, prow, pstride, h); p.v2 = u.w; p.vs.z = u.s; }
  if (NPV > 3u && lid + 3u * WG < BK * H8) { let u = pf_v(lid + 3u * WG, kt, nk, prow, pstride, h); p.v3 = u.w; p.vs.w = u.s; }
  return p;
}

fn pf_putv(e: u32, w: vec2<u32>, s: f32) {
  if (e < BK * H8) { vput(at(e / H8, e % H8), kv8_unpack(w.x, s), kv8_unpack(w.y, s)); }
}

fn pf_store(lid: u32, p: Pf) {
  if (lid < BK * H16) { kq[lid] = p.k0; }
  if (NPF > 1u && lid + WG < BK * H16) { kq[lid + WG] = p.k1; }
  if (lid < BK * NB) { ksc[lid] = p.s; }
  pf_putv(lid, p.v0, p.vs.x);
  if (NPV > 1u) { pf_putv(lid + WG, p.v1, p.vs.y); }
  if (NPV > 2u) { pf_putv(lid + 2u * WG, p.v2, p.vs.z); }
  if (NPV > 3u) { pf_putv(lid + 3u * WG, p.v3, p.vs.w); }
}
#endif

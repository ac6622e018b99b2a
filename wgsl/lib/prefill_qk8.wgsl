// INT8_QK part of the prefill attention kernels (q8 cache, 32 dims per lane = one scale block; after
// lib/prefill.wgsl): q·k on integer dot products, four products per dot4I8Packed, as SageAttention does. Each
// lane quantizes its 32 dims of q·scale to int8 with one scale (the cache's rule, lib/kv8.wgsl), the K tile
// stays the cache's codes with their block scales, and a lane's partial score is f32(Σ q_code·k_code) · s_q ·
// s_k (exact integer sum: |Σ| < 2^19). Scores then carry q's rounding (≤ 1/254 of its block max) besides the
// cache's. The quad kernel (16 dims per lane) has its own q quantization.

// H16 and NB are consts from the host, not overrides: naga 29 panics (pipeline_constants.rs, "unreachable")
// on workgroup arrays sized by these overrides.
const H16: u32 = {{K_CODE_VEC4S}}u;   // vec4<u32>s (16 codes) per K row
const NB: u32 = {{K_SCALES}}u;        // scale blocks per K row
var<workgroup> kq: array<vec4<u32>, BK * H16>;
var<workgroup> ksc: array<f32, BK * NB>;

// A lane's 32 dims of a query as codes, and their scale.
struct Q8 { w0: vec4<u32>, w1: vec4<u32>, s: f32 }

fn qquant(h: Hv) -> Q8 {
  let m = max(max(max(abs(h.v0), abs(h.v1)), max(abs(h.v2), abs(h.v3))),
              max(max(abs(h.v4), abs(h.v5)), max(abs(h.v6), abs(h.v7))));
  let amax = max(max(m.x, m.y), max(m.z, m.w));
  let inv = kv8_inv(amax);
  return Q8(vec4<u32>(kv8_pack(h.v0, inv), kv8_pack(h.v1, inv), kv8_pack(h.v2, inv), kv8_pack(h.v3, inv)),
            vec4<u32>(kv8_pack(h.v4, inv), kv8_pack(h.v5, inv), kv8_pack(h.v6, inv), kv8_pack(h.v7, inv)),
            amax / 127.0);
}

fn idot8(a0: vec4<u32>, a1: vec4<u32>, k0: vec4<u32>, k1: vec4<u32>) -> i32 {
  return ((dot4I8Packed(a0.x, k0.x) + dot4I8Packed(a0.y, k0.y)) +
          (dot4I8Packed(a0.z, k0.z) + dot4I8Packed(a0.w, k0.w))) +
         ((dot4I8Packed(a1.x, k1.x) + dot4I8Packed(a1.y, k1.y)) +
          (dot4I8Packed(a1.z, k1.z) + dot4I8Packed(a1.w, k1.w)));
}

// Partial q·k of both query vectors over this lane's block, for key row t of the tile.
fn kdot2q(qa: Q8, qb: Q8, t: u32, lane: u32) -> vec2<f32> {
  let k0 = kq[t * H16 + 2u * lane];
  let k1 = kq[t * H16 + 2u * lane + 1u];
  let sk = ksc[t * NB + lane];
  return vec2<f32>(f32(idot8(qa.w0, qa.w1, k0, k1)) * qa.s, f32(idot8(qb.w0, qb.w1, k0, k1)) * qb.s) * sk;
}

// K tile unit e (row e / H16): 16 codes of keys kt .. kt+BK−1 (clamped to the last key: pad rows are masked;
// key_row: attention_prefill.wgsl), and scale unit e (row e / NB): one block scale.
fn k8_unit(e: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> vec4<u32> {
  let w = key_row(prow, pstride, h, kt + min(e / H16, nk - 1u)) / 4u + (e % H16) * 4u;
  return vec4<u32>(kv[w], kv[w + 1u], kv[w + 2u], kv[w + 3u]);
}
fn k8_scale(e: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) -> f32 {
  return kvs[key_row(prow, pstride, h, kt + min(e / NB, nk - 1u)) / 32u + e % NB];
}

// The K tile: codes (4 words of the cache per vec4) and block scales.
fn load_k8(lid: u32, kt: u32, nk: u32, prow: u32, pstride: u32, h: u32) {
  for (var e = lid; e < BK * H16; e += WG) { kq[e] = k8_unit(e, kt, nk, prow, pstride, h); }
  for (var e = lid; e < BK * NB; e += WG) { ksc[e] = k8_scale(e, kt, nk, prow, pstride, h); }
}

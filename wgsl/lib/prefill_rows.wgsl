// Tile-row readers of attention_prefill.wgsl: a lane's dims 8j .. 8j+7 of a K row (krow, not under QK8: its
// K tile is codes, lib/prefill_qk8.wgsl) and of a V row (vrow, step2's reader) as f32, from the f32 tile, the
// cache's f16 words (PACKED) or HPV's f16 values; and q·k over the f32 values (kdot2, not under QK8).
#ifndef QK8
#ifdef HQK
fn krow(b: u32, j: u32) -> Two { let p = ks[b + j]; return Two(vec4<f32>(p.x), vec4<f32>(p.y)); }
#elif PACKED
fn krow(b: u32, j: u32) -> Two { let p = ks[b + j]; return Two(lo8(p), hi8(p)); }
#else
fn krow(b: u32, j: u32) -> Two { return Two(ks[b + 2u * j], ks[b + 2u * j + 1u]); }
#endif
#endif
#ifdef HPV
// (step2's reader; the four-key step sums the f16 rows itself)
fn vrow(b: u32, j: u32) -> Two { let p = vh(b + j); return Two(vec4<f32>(p.x), vec4<f32>(p.y)); }
#elif PACKED
fn vrow(b: u32, j: u32) -> Two { let p = vs[b + j]; return Two(lo8(p), hi8(p)); }
#else
fn vrow(b: u32, j: u32) -> Two { return Two(vs[b + 2u * j], vs[b + 2u * j + 1u]); }
#endif

#ifndef QK8
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
#if NV4GE4
  k = krow(kb, 1u);
  e = fd(e, qa.v2, qb.v2, k.a);
  o = fd(o, qa.v3, qb.v3, k.b);
#endif
#if NV4GE8
  k = krow(kb, 2u);
  e = fd(e, qa.v4, qb.v4, k.a);
  o = fd(o, qa.v5, qb.v5, k.b);
  k = krow(kb, 3u);
  e = fd(e, qa.v6, qb.v6, k.a);
  o = fd(o, qa.v7, qb.v7, k.b);
#endif
  return e + o;
}
#endif

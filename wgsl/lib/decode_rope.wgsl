// The ROPE part of attention_decode.wgsl (included there under ROPE, after its bindings and Kv8/q8): the
// RoPE inputs, the workgroup tables of the prepared heads, and `prepare`, which does rope.wgsl's work for a
// workgroup's heads and writes the new K/V of the split holding position pos. Needs lib/rope.wgsl (cos_sin).

@group(0) @binding(8) var<storage, read> inv_freq: array<f32>;
#ifdef QK_NORM
@group(0) @binding(9) var<storage, read> qn: array<f32>;
@group(0) @binding(10) var<storage, read> kn: array<f32>;
#endif
var<workgroup> sm_h: array<f32, 5u * HD>;  // normalised heads: query heads g0 .. g0+3, then the new key
var<workgroup> sm_q: array<f32, 5u * HD>;  // the same heads rotated (query heads rounded to act)
#ifndef LANE_SUBGROUP
var<workgroup> sm_ss: array<f32, WG>;
#endif
#ifdef KV8
var<workgroup> sm_amax: array<vec2<f32>, 32>;  // per lane of group 0 (L ≤ 32): max |K|, max |V| of its 8 dims
fn max8(x: vec4<f32>) -> f32 { let a = abs(x); return max(max(a.x, a.y), max(a.z, a.w)); }
#endif

// Stores 8 values of a K or V row at element e. KV8: `amax` is the max |value| of their block (QB values).
fn put_kv8(e: u32, a: vec4<f32>, b: vec4<f32>, amax: f32) {
#ifdef KV8
  let inv = kv8_inv(amax);
  kv[e / 8u] = vec2<u32>(kv8_pack(a, inv), kv8_pack(b, inv));
  if (e % QB == 0u) { kvs[e / QB] = amax / 127.0; }
#elif F16
  kv[e / 8u] = vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy), pack2x16float(b.zw));
#else
  kv[e / 4u] = a;
  kv[e / 4u + 1u] = b;
#endif
}

fn sm8(o: u32) -> Kv8 {
  return Kv8(vec4<f32>(sm_q[o], sm_q[o + 1u], sm_q[o + 2u], sm_q[o + 3u]),
             vec4<f32>(sm_q[o + 4u], sm_q[o + 5u], sm_q[o + 6u], sm_q[o + 7u]));
}

// rope.wgsl's work for this workgroup's heads: group t·KG + grp takes head t·KG + grp of (query heads g0 ..
// g0+3 clamped to G, then the key when `own_k`), 8 dims per lane. Every trip count is the same for all
// lanes, so the barriers (and shuffles) stay in uniform control flow. With `own_k`, K and V of position
// pos go into the cache at element `kb` (K; V follows `pvoff` later), visible to the workgroup after.
fn prepare(r: u32, h: u32, g0: u32, grp: u32, lane: u32, lid: u32, pos: u32, own_k: bool, kb: u32,
           pvoff: u32) {
  let width = (params.nq + 2u * params.nkv) * HD;
  let d0 = lane * 8u;
  let nh = select(4u, 5u, own_k);
  let trips = (5u + KG - 1u) / KG;
  // cos/sin of this lane's 8 dims (the same for every head), first: their loads overlap the head loads.
  let half = params.rot / 2u;
  let fpos = f32(pos);
  var ca: vec4<f32>;
  var sa: vec4<f32>;
  var cb: vec4<f32>;
  var sb: vec4<f32>;
  for (var c = 0u; c < 4u; c++) {
    let e = cos_sin(fpos * inv_freq[min(select(d0 + c, d0 + c - half, d0 + c >= half), half - 1u)]);
    ca[c] = e.x;
    sa[c] = e.y;
    let f = cos_sin(fpos *
                    inv_freq[min(select(d0 + 4u + c, d0 + 4u + c - half, d0 + 4u + c >= half), half - 1u)]);
    cb[c] = f.x;
    sb[c] = f.y;
  }
  for (var t = 0u; t < trips; t++) {
    let hh = min(t * KG + grp, 4u);
    var src = r * width + (params.nq + h) * HD;
    if (hh < 4u) { src = r * width + (h * G + min(g0 + hh, G - 1u)) * HD; }
    var x = q8(src + d0);
#ifdef QK_NORM
    var ss = dot(x.a, x.a) + dot(x.b, x.b);
#ifdef LANE_SUBGROUP
    for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) { ss += subgroupShuffleXor(ss, mask); }
#else
    sm_ss[lid] = ss;
    workgroupBarrier();
    ss = 0.0;
    for (var i = 0u; i < L; i++) { ss += sm_ss[grp * L + i]; }
    workgroupBarrier();
#endif
    let inv = inverseSqrt(ss / f32(HD) + params.eps);
    if (hh < 4u) {
      x = Kv8(x.a * inv * vec4<f32>(qn[d0], qn[d0 + 1u], qn[d0 + 2u], qn[d0 + 3u]),
              x.b * inv * vec4<f32>(qn[d0 + 4u], qn[d0 + 5u], qn[d0 + 6u], qn[d0 + 7u]));
    } else {
      x = Kv8(x.a * inv * vec4<f32>(kn[d0], kn[d0 + 1u], kn[d0 + 2u], kn[d0 + 3u]),
              x.b * inv * vec4<f32>(kn[d0 + 4u], kn[d0 + 5u], kn[d0 + 6u], kn[d0 + 7u]));
    }
#endif
    if (t * KG + grp < nh) {
      for (var c = 0u; c < 4u; c++) {
        sm_h[hh * HD + d0 + c] = x.a[c];
        sm_h[hh * HD + d0 + 4u + c] = x.b[c];
      }
    }
  }
  workgroupBarrier();
  // Rotate-half over the first `rot` dims: pairs (i, i + rot/2), angle pos · inv_freq[i].
  for (var t = 0u; t < trips; t++) {
    let hh = t * KG + grp;
    if (hh < nh) {
      for (var c = 0u; c < 8u; c++) {
        let d = d0 + c;
        var v = sm_h[hh * HD + d];
        if (d < params.rot) {
          let hi = d >= half;
          let cs = select(vec2<f32>(cb[c & 3u], sb[c & 3u]), vec2<f32>(ca[c], sa[c]), c < 4u);
          let p = sm_h[hh * HD + select(d + half, d - half, hi)];
          v = select(v * cs.x - p * cs.y, v * cs.x + p * cs.y, hi) * params.mscale;
        }
        sm_q[hh * HD + d] = select(v, f32(act(v)), hh < 4u);
      }
    }
  }
  workgroupBarrier();
  if (own_k) {
    // Group 0 writes the new K and V rows, 8 dims a lane.
    var k: Kv8;
    var v: Kv8;
    var amax = vec2<f32>(0.0);
    if (grp == 0u) {
      k = sm8(4u * HD + d0);
      v = q8(r * width + (params.nq + params.nkv + h) * HD + d0);
    }
#ifdef KV8
    // Block maxima (K, V) across the QB/8 lanes of each block, through workgroup memory.
    if (grp == 0u) {
      sm_amax[lane] = vec2<f32>(max(max8(k.a), max8(k.b)), max(max8(v.a), max8(v.b)));
    }
    workgroupBarrier();
    if (grp == 0u) {
      let b0 = (lane / (QB / 8u)) * (QB / 8u);
      for (var i = 0u; i < QB / 8u; i++) { amax = max(amax, sm_amax[b0 + i]); }
    }
#endif
    if (grp == 0u) {
      put_kv8(kb, k.a, k.b, amax.x);
      put_kv8(kb + pvoff, v.a, v.b, amax.y);
    }
    storageBarrier();
  }
}

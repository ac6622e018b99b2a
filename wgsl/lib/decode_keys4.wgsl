// The key loop of attention_decode.wgsl under FOUR_KEYS_PER_STEP (with LANE_SUBGROUP, for a q8 (KV8) or
// f16 cache, with or without ROPE): a group walks four keys per step (t, t + KG, t + 2·KG, t + 3·KG), all
// four fetched one step ahead as raw words (q8: vec2<u32> + scale, 3 registers a row; f16: 4; 8 unpacked),
// so twice the keys of the two-key loop are in flight for the same registers and the online softmax takes
// half the dependent steps. The scales are applied once per key (to the four scores, and to the four weights
// of the V row), not per value. Same function as the two-key loop; the rounding differs (so the bits may).

// A K or V row's 8 values as loaded, and the same as f32 (unscaled) with the factor to apply once per key.
#ifdef KV8
struct Raw { w: vec2<u32>, s: f32 }
fn raw(e: u32) -> Raw { return Raw(kv[e / 8u], kvs[e / QB]); }
fn codes(x: Raw) -> Kv8 { return Kv8(kv8_codes(x.w.x), kv8_codes(x.w.y)); }
fn rscale(x: Raw) -> f32 { return x.s; }
#else
// f16 cache: the packed words (4 registers a row instead of 8).
struct Raw { w: vec4<u32> }
fn raw(e: u32) -> Raw { return Raw(kv[e / 8u]); }
fn codes(x: Raw) -> Kv8 {
  return Kv8(vec4<f32>(unpack2x16float(x.w.x), unpack2x16float(x.w.y)),
             vec4<f32>(unpack2x16float(x.w.z), unpack2x16float(x.w.w)));
}
fn rscale(x: Raw) -> f32 { return 1.0; }
#endif

struct Pre4 { k0: Raw, v0: Raw, k1: Raw, v1: Raw, k2: Raw, v2: Raw, k3: Raw, v3: Raw }

// K and V of keys t, t + KG, t + 2·KG, t + 3·KG of the split (clamped to its last key: those are masked;
// key_at: attention_decode.wgsl).
fn fetch4(t: u32, j0: u32, nj: u32, p0: u32, pstride: u32, hoff: u32, pvoff: u32) -> Pre4 {
  let e0 = key_at(j0 + min(t, nj - 1u), p0, pstride, hoff);
  let e1 = key_at(j0 + min(t + KG, nj - 1u), p0, pstride, hoff);
  let e2 = key_at(j0 + min(t + 2u * KG, nj - 1u), p0, pstride, hoff);
  let e3 = key_at(j0 + min(t + 3u * KG, nj - 1u), p0, pstride, hoff);
  return Pre4(raw(e0), raw(e0 + pvoff), raw(e1), raw(e1 + pvoff), raw(e2), raw(e2 + pvoff), raw(e3),
              raw(e3 + pvoff));
}

// This lane's part of the four heads' scores for one key.
fn dots4(q0: Kv8, q1: Kv8, q2: Kv8, q3: Kv8, k: Kv8, sc: f32) -> vec4<f32> {
  return vec4<f32>(dot(q0.a, k.a) + dot(q0.b, k.b), dot(q1.a, k.a) + dot(q1.b, k.b),
                   dot(q2.a, k.a) + dot(q2.b, k.b), dot(q3.a, k.a) + dot(q3.b, k.b)) * sc;
}

// The loop; `first` holds keys grp, grp + KG, ... (fetch4(grp, ...), issued by the caller so that their
// latency can hide behind the RoPE preparation).
fn walk4(st0: St, first: Pre4, q0: Kv8, q1: Kv8, q2: Kv8, q3: Kv8, j0: u32, nj: u32, p0: u32, grp: u32,
         pstride: u32, hoff: u32, pvoff: u32, sc: f32) -> St {
  var st = st0;
  var nx = first;
  for (var t0 = 0u; t0 < nj; t0 += 4u * KG) {
    let t = t0 + grp;
    let cur = nx;
    nx = fetch4(t + 4u * KG, j0, nj, p0, pstride, hoff, pvoff);
    var d0 = dots4(q0, q1, q2, q3, codes(cur.k0), sc * rscale(cur.k0));
    var d1 = dots4(q0, q1, q2, q3, codes(cur.k1), sc * rscale(cur.k1));
    var d2 = dots4(q0, q1, q2, q3, codes(cur.k2), sc * rscale(cur.k2));
    var d3 = dots4(q0, q1, q2, q3, codes(cur.k3), sc * rscale(cur.k3));
    for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) {
      d0 += subgroupShuffleXor(d0, mask);
      d1 += subgroupShuffleXor(d1, mask);
      d2 += subgroupShuffleXor(d2, mask);
      d3 += subgroupShuffleXor(d3, mask);
    }
    if (t < nj) {
      // Keys past the split weigh e^-inf = 0.
      d1 = select(d1, vec4<f32>(-3.0e38), t + KG >= nj);
      d2 = select(d2, vec4<f32>(-3.0e38), t + 2u * KG >= nj);
      d3 = select(d3, vec4<f32>(-3.0e38), t + 3u * KG >= nj);
      let mn = max(st.m, max(max(d0, d1), max(d2, d3)));
      let c = exp(st.m - mn);
      let e0 = exp(d0 - mn);
      let e1 = exp(d1 - mn);
      let e2 = exp(d2 - mn);
      let e3 = exp(d3 - mn);
      st.l = st.l * c + (e0 + e1) + (e2 + e3);
      // Weights of the V codes: e · the row's scale.
      let p0 = e0 * rscale(cur.v0);
      let p1 = e1 * rscale(cur.v1);
      let p2 = e2 * rscale(cur.v2);
      let p3 = e3 * rscale(cur.v3);
      let v0 = codes(cur.v0);
      let v1 = codes(cur.v1);
      let v2 = codes(cur.v2);
      let v3 = codes(cur.v3);
      st.a0 = st.a0 * c.x + p0.x * v0.a + p1.x * v1.a + p2.x * v2.a + p3.x * v3.a;
      st.b0 = st.b0 * c.x + p0.x * v0.b + p1.x * v1.b + p2.x * v2.b + p3.x * v3.b;
      st.a1 = st.a1 * c.y + p0.y * v0.a + p1.y * v1.a + p2.y * v2.a + p3.y * v3.a;
      st.b1 = st.b1 * c.y + p0.y * v0.b + p1.y * v1.b + p2.y * v2.b + p3.y * v3.b;
      st.a2 = st.a2 * c.z + p0.z * v0.a + p1.z * v1.a + p2.z * v2.a + p3.z * v3.a;
      st.b2 = st.b2 * c.z + p0.z * v0.b + p1.z * v1.b + p2.z * v2.b + p3.z * v3.b;
      st.a3 = st.a3 * c.w + p0.w * v0.a + p1.w * v1.a + p2.w * v2.a + p3.w * v3.a;
      st.b3 = st.b3 * c.w + p0.w * v0.b + p1.w * v1.b + p2.w * v2.b + p3.w * v3.b;
      st.m = mn;
    }
  }
  return st;
}

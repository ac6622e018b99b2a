// PKEYS8 part of attention_prefill.wgsl (with HPV): eight keys per online-softmax step, so the f16 P·V
// partial of a query vector sums eight keys before it is converted and added to the f32 state (per 8 dims
// and vector: 32 f16 FMAs, 8 conversions and 8 f32 FMAs per eight keys, where two four-key steps take 32,
// 16 and 16), and the state is rescaled once per eight keys. Keys are grouped from multiples of eight in
// every tile (tiles start at multiples of BK ≥ 8), so a row's bits do not depend on the tile or segment
// shape. The partial carries f16 rounding of eight products (p ≤ 1), not the running sum.

struct W8 { mn: f32, c: f32, p: vec4<f32>, q: vec4<f32> }

// New max, rescale of the old state, and the weights of keys 0–3 (p) and 4–7 (q) (masked: −3e38, weight 0).
fn weights8(m: f32, lo: vec4<f32>, hi: vec4<f32>) -> W8 {
  let x = max(lo, hi);
  let mn = max(m, max(max(x.x, x.y), max(x.z, x.w)));
  return W8(mn, exp(m - mn), exp(lo - vec4<f32>(mn)), exp(hi - vec4<f32>(mn)));
}

fn sum8h(x0: vec4<f16>, x1: vec4<f16>, x2: vec4<f16>, x3: vec4<f16>, x4: vec4<f16>, x5: vec4<f16>, x6: vec4<f16>,
         x7: vec4<f16>, h: vec4<f16>, k: vec4<f16>) -> vec4<f16> {
  return fma(x7, vec4<f16>(k.w), fma(x6, vec4<f16>(k.z), fma(x5, vec4<f16>(k.y), fma(x4, vec4<f16>(k.x),
         fma(x3, vec4<f16>(h.w), fma(x2, vec4<f16>(h.z), fma(x1, vec4<f16>(h.y), x0 * vec4<f16>(h.x))))))));
}

// Both vectors' partials of 8 dims (packed position j of the rows r (keys 0–3), u (keys 4–7)), each V value
// read once for both.
fn part8(r: vec4<u32>, u: vec4<u32>, j: u32, ha: vec4<f16>, ka: vec4<f16>, hb: vec4<f16>, kb: vec4<f16>) -> Part {
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
#if NV4GE4
  t = part8(r, u, 1u, ha, ka, hb, kb);
  o.a.o.v2 = s.a.o.v2 * wa.c + t.a.a;
  o.a.o.v3 = s.a.o.v3 * wa.c + t.a.b;
  o.b.o.v2 = s.b.o.v2 * wb.c + t.b.a;
  o.b.o.v3 = s.b.o.v3 * wb.c + t.b.b;
#endif
#if NV4GE8
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

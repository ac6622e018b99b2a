// PKEYS4 part of attention_prefill.wgsl: four keys per online-softmax step instead of two, so each query
// vector's state (its 4·NV4 dims of o) is rescaled once per four keys: per pair of keys, 8·NV4 multiplies
// fewer out of ~40·NV4 operations. Keys are grouped from multiples of four in every tile (tiles start at
// multiples of BK ≥ 4), so a row's bits still do not depend on the tile or segment shape.

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

#ifdef HPV
// HPV (V tile as f16 values, one Hh per 8 dims): the four keys' weighted V rows summed in f16 (packed f16
// FMAs, two dims per instruction, no unpacking), then added to the f32 state: per 8 dims and vector 16 f16
// FMAs, 8 conversions and 8 f32 FMAs instead of 32 FMAs, 8 multiplies and a share of 32 conversions. The partial
// carries f16 rounding of four products (p ≤ 1), not the running sum. part: both vectors' partials of 8
// dims (packed positions i0..i3 of the four keys), each V value read once for both.
struct Part { a: Two, b: Two }
fn part(i0: u32, i1: u32, i2: u32, i3: u32, ha: vec4<f16>, hb: vec4<f16>) -> Part {
  let p0 = vh(i0);
  let p1 = vh(i1);
  let p2 = vh(i2);
  let p3 = vh(i3);
  return Part(Two(vec4<f32>(sum4h(p0.x, p1.x, p2.x, p3.x, ha)), vec4<f32>(sum4h(p0.y, p1.y, p2.y, p3.y, ha))),
              Two(vec4<f32>(sum4h(p0.x, p1.x, p2.x, p3.x, hb)), vec4<f32>(sum4h(p0.y, p1.y, p2.y, p3.y, hb))));
}
fn sum4h(x0: vec4<f16>, x1: vec4<f16>, x2: vec4<f16>, x3: vec4<f16>, h: vec4<f16>) -> vec4<f16> {
  return fma(x3, vec4<f16>(h.w), fma(x2, vec4<f16>(h.z), fma(x1, vec4<f16>(h.y), x0 * vec4<f16>(h.x))));
}

fn step4(s: Pair, wa: W4, wb: W4, r0: u32, r1: u32, r2: u32, r3: u32) -> Pair {
  var r = ml4(s, wa, wb);
  let ha = vec4<f16>(wa.p);
  let hb = vec4<f16>(wb.p);
  var t = part(r0, r1, r2, r3, ha, hb);
  r.a.o.v0 = s.a.o.v0 * wa.c + t.a.a;
  r.a.o.v1 = s.a.o.v1 * wa.c + t.a.b;
  r.b.o.v0 = s.b.o.v0 * wb.c + t.b.a;
  r.b.o.v1 = s.b.o.v1 * wb.c + t.b.b;
#if NV4GE4
  t = part(r0 + 1u, r1 + 1u, r2 + 1u, r3 + 1u, ha, hb);
  r.a.o.v2 = s.a.o.v2 * wa.c + t.a.a;
  r.a.o.v3 = s.a.o.v3 * wa.c + t.a.b;
  r.b.o.v2 = s.b.o.v2 * wb.c + t.b.a;
  r.b.o.v3 = s.b.o.v3 * wb.c + t.b.b;
#endif
#if NV4GE8
  t = part(r0 + 2u, r1 + 2u, r2 + 2u, r3 + 2u, ha, hb);
  r.a.o.v4 = s.a.o.v4 * wa.c + t.a.a;
  r.a.o.v5 = s.a.o.v5 * wa.c + t.a.b;
  r.b.o.v4 = s.b.o.v4 * wb.c + t.b.a;
  r.b.o.v5 = s.b.o.v5 * wb.c + t.b.b;
  t = part(r0 + 3u, r1 + 3u, r2 + 3u, r3 + 3u, ha, hb);
  r.a.o.v6 = s.a.o.v6 * wa.c + t.a.a;
  r.a.o.v7 = s.a.o.v7 * wa.c + t.a.b;
  r.b.o.v6 = s.b.o.v6 * wb.c + t.b.a;
  r.b.o.v7 = s.b.o.v7 * wb.c + t.b.b;
#endif
  return r;
}
#else
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
#if NV4GE4
  x0 = vrow(r0, 1u);
  x1 = vrow(r1, 1u);
  x2 = vrow(r2, 1u);
  x3 = vrow(r3, 1u);
  r.a.o.v2 = upd4(s.a.o.v2, wa, x0.a, x1.a, x2.a, x3.a);
  r.b.o.v2 = upd4(s.b.o.v2, wb, x0.a, x1.a, x2.a, x3.a);
  r.a.o.v3 = upd4(s.a.o.v3, wa, x0.b, x1.b, x2.b, x3.b);
  r.b.o.v3 = upd4(s.b.o.v3, wb, x0.b, x1.b, x2.b, x3.b);
#endif
#if NV4GE8
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

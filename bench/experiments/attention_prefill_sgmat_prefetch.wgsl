// EXPERIMENT (bench/NOTES.md #128, not faster): wgsl/attention_prefill_sgmat.wgsl with the K and V pieces
// fetched into registers ahead of their barriers (next K during P·V, V during q·k); f16 cache only. Timed in
// the lab by copying it over the engine's file.
// Causal attention for a prefill segment on matrix units (Dawn's subgroup matrices, f16 × f16 → f32,
// 16×16×16), head dim 128, same params and bindings as attention_prefill.wgsl (lib/prefill_params.wgsl):
//   out[row, h, :] = Σ_j softmax_j(scale · q[row, h]·K[j]) V[j]     over the keys j row's position sees
// A workgroup is 4 subgroups of 32 lanes, each 16 query rows of one head: GH heads of one kv head × 64/GH
// positions. Per tile of 64 keys: K staged as f16 (lanes' 16-byte pieces; KV8: codes dequantized and
// rounded), S = Q·Kᵀ in f32 fragments (Q's eight held from the start) stored to workgroup memory, where two
// lanes a row mask, scale and exponentiate it into P (f16) while V is staged into K's place; then O += P·V
// in f32 fragments. P is taken against a reference max that moves only when a row's max passes it by more
// than TAU (so P ≤ e^TAU): a fragment has no per-row scaling, so O is rescaled through workgroup memory only
// on those tiles, and leaves through it at the end divided by its sum. Fragments are named variables
// (indexed arrays of them spill, bench/NOTES.md #113) and addresses are computed where used (#126).
// Grid: (ceil(S / (64 / GH)), nkv · G / GH). 128 lanes; subgroups of exactly 32 (the host checks).
// Workgroup memory: the K/V tile 64 × 136 f16, S 4 × 16 × 72 f32, P 4 × 16 × 72 f16 (44 KiB).
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
#include "lib/common.wgsl"
#ifdef KV8
#include "lib/kv8.wgsl"
#endif
#include "lib/prefill_params.wgsl"

override G: u32 = 4;    // query heads per kv head
override GH: u32 = 4;   // of them per workgroup (1, 2 or 4; divides G)
const SA: u32 = 136u;   // tile row stride (halves): 128 + 8 against bank conflicts
const SS: u32 = 72u;    // S row stride (f32)
const SP: u32 = 72u;    // P row stride (halves)
override TAU: f32 = 8.0;   // how far a row's max may pass its reference before O is rescaled (≤ 11: f16)

var<workgroup> tile: array<f16, 64 * 136>;
var<workgroup> ss: array<f32, 4 * 16 * 72>;
var<workgroup> sp: array<f16, 4 * 16 * 72>;
var<workgroup> grew: array<u32, 4>;

alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Acc = subgroup_matrix_result<f32, 16, 16>;

// Keys kt .. kt+63 of kv head kvh (rows past kmax − 1 repeat it: masked), K (vk 0) or V (vk 1), into the
// tile: 1024 pieces of 8 halves, 8 a lane.
fn stage(lid: u32, kt: u32, kmax: u32, prow: u32, pstride: u32, kvh: u32, vk: u32) {
  for (var i = 0u; i < 8u; i++) {
    let e = lid + i * 128u;
    let o = (e / 16u) * SA + (e % 16u) * 8u;
    let c = key_row(prow, pstride, kvh, min(kt + e / 16u, kmax - 1u)) + vk * params.nkv * params.ps * HD +
      (e % 16u) * 8u;
#ifdef KV8
    let s = kvs[c / QB];
    let a = vec4<f16>(kv8_unpack(kv[c / 4u], s));
    let b = vec4<f16>(kv8_unpack(kv[c / 4u + 1u], s));
    tile[o] = a.x; tile[o + 1u] = a.y; tile[o + 2u] = a.z; tile[o + 3u] = a.w;
    tile[o + 4u] = b.x; tile[o + 5u] = b.y; tile[o + 6u] = b.z; tile[o + 7u] = b.w;
#else
    let v = kv[c / 8u];
    let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
    tile[o] = h0.x; tile[o + 1u] = h0.y; tile[o + 2u] = h1.x; tile[o + 3u] = h1.y;
    tile[o + 4u] = h2.x; tile[o + 5u] = h2.y; tile[o + 6u] = h3.x; tile[o + 7u] = h3.y;
#endif
  }
}

struct Pieces { a0: vec4<u32>, a1: vec4<u32>, a2: vec4<u32>, a3: vec4<u32>,
                a4: vec4<u32>, a5: vec4<u32>, a6: vec4<u32>, a7: vec4<u32> }
fn piece(e: u32, kt: u32, kmax: u32, prow: u32, pstride: u32, kvh: u32, vk: u32) -> vec4<u32> {
  let c = key_row(prow, pstride, kvh, min(kt + e / 16u, kmax - 1u)) + vk * params.nkv * params.ps * HD +
    (e % 16u) * 8u;
  return kv[c / 8u];
}
fn fetch(lid: u32, kt: u32, kmax: u32, prow: u32, pstride: u32, kvh: u32, vk: u32) -> Pieces {
  let a = vec4<u32>(kt, kmax, prow, pstride);
  return Pieces(piece(lid, a.x, a.y, a.z, a.w, kvh, vk), piece(lid + 128u, a.x, a.y, a.z, a.w, kvh, vk),
    piece(lid + 256u, a.x, a.y, a.z, a.w, kvh, vk), piece(lid + 384u, a.x, a.y, a.z, a.w, kvh, vk),
    piece(lid + 512u, a.x, a.y, a.z, a.w, kvh, vk), piece(lid + 640u, a.x, a.y, a.z, a.w, kvh, vk),
    piece(lid + 768u, a.x, a.y, a.z, a.w, kvh, vk), piece(lid + 896u, a.x, a.y, a.z, a.w, kvh, vk));
}
fn put1(e: u32, v: vec4<u32>) {
  let o = (e / 16u) * SA + (e % 16u) * 8u;
  let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
  let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
  tile[o] = h0.x; tile[o + 1u] = h0.y; tile[o + 2u] = h1.x; tile[o + 3u] = h1.y;
  tile[o + 4u] = h2.x; tile[o + 5u] = h2.y; tile[o + 6u] = h3.x; tile[o + 7u] = h3.y;
}
fn put(lid: u32, p: Pieces) {
  put1(lid, p.a0); put1(lid + 128u, p.a1); put1(lid + 256u, p.a2); put1(lid + 384u, p.a3);
  put1(lid + 512u, p.a4); put1(lid + 640u, p.a5); put1(lid + 768u, p.a6); put1(lid + 896u, p.a7);
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let i0 = wid.x * (64u / GH);                  // the workgroup's first segment row
  let nqb = min(64u / GH, params.S - i0);
  let kvh = wid.y / (G / GH);
  let h = kvh * G + (wid.y % (G / GH)) * GH + sid % GH;   // this subgroup's query head ...
  let ib = i0 + (sid / GH) * 16u;                         // ... and first segment row
  let prow = rows[params.row0 + i0].slot * params.max_pages;
  let pstride = 2u * params.nkv * params.ps * HD;
  let kmax = rows[params.row0 + i0 + nqb - 1u].pos + 1u;
  let k0 = first_tile(rows[params.row0 + i0].pos);
  // This lane's row (two lanes a row) and its 32 keys of every tile: 4-key chunks 2c + hf (c < 8), so the
  // 16-byte reads of a quarter-warp meet distinct banks.
  let r = lane / 2u;
  let hf = lane % 2u;
  let real = ib + r < params.S;
  let pos = rows[params.row0 + min(ib + r, params.S - 1u)].pos;
  let sb = sid * 16u * SS + r * SS + hf * 4u;   // this lane's first chunk of S (and of O on its way out)
  let pb = sid * 16u * SP + r * SP + hf * 4u;   // and of P

  // Q: the subgroup's 16 rows (zeros past the segment) staged in tile rows 16·sid .., held as fragments.
  for (var c = 0u; c < 64u; c++) {
    let e = lane + c * 32u;
    let qr = e / 128u;
    let d = e % 128u;
    let qrow = params.row0 + min(ib + qr, params.S - 1u);
    let v = f16(q[(qrow * params.nq + h) * HD + d]);
    tile[(sid * 16u + qr) * SA + d] = select(f16(0.0), v, ib + qr < params.S);
  }
  workgroupBarrier();
  let q0 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA, false, SA);
  let q1 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA + 16u, false, SA);
  let q2 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA + 32u, false, SA);
  let q3 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA + 48u, false, SA);
  let q4 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA + 64u, false, SA);
  let q5 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA + 80u, false, SA);
  let q6 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA + 96u, false, SA);
  let q7 = subgroupMatrixLoad<Left>(&tile, sid * 16u * SA + 112u, false, SA);
  var o0 = Acc(); var o1 = Acc(); var o2 = Acc(); var o3 = Acc();
  var o4 = Acc(); var o5 = Acc(); var o6 = Acc(); var o7 = Acc();
  var m = M0;     // the row's reference max
  var l = 0.0;    // and this lane's share of its sum of e^(s − m)

  var pk = fetch(lid, k0, kmax, prow, pstride, kvh, 0u);
  for (var kt = k0; kt < kmax; kt += 64u) {
    workgroupBarrier();   // the previous tile's V (at first: Q) read by every subgroup
    put(lid, pk);
    workgroupBarrier();
    let pv = fetch(lid, kt, kmax, prow, pstride, kvh, 1u);
    // S: key fragment f (keys 16f ..) summed over the eight dim fragments; Kᵀ is the tile read column-major.
    var s0 = Acc(); var s1 = Acc(); var s2 = Acc(); var s3 = Acc();
    s0 = subgroupMatrixMultiplyAccumulate(q0, subgroupMatrixLoad<Right>(&tile, 0u, true, SA), s0);
    s0 = subgroupMatrixMultiplyAccumulate(q1, subgroupMatrixLoad<Right>(&tile, 16u, true, SA), s0);
    s0 = subgroupMatrixMultiplyAccumulate(q2, subgroupMatrixLoad<Right>(&tile, 32u, true, SA), s0);
    s0 = subgroupMatrixMultiplyAccumulate(q3, subgroupMatrixLoad<Right>(&tile, 48u, true, SA), s0);
    s0 = subgroupMatrixMultiplyAccumulate(q4, subgroupMatrixLoad<Right>(&tile, 64u, true, SA), s0);
    s0 = subgroupMatrixMultiplyAccumulate(q5, subgroupMatrixLoad<Right>(&tile, 80u, true, SA), s0);
    s0 = subgroupMatrixMultiplyAccumulate(q6, subgroupMatrixLoad<Right>(&tile, 96u, true, SA), s0);
    s0 = subgroupMatrixMultiplyAccumulate(q7, subgroupMatrixLoad<Right>(&tile, 112u, true, SA), s0);
    s1 = subgroupMatrixMultiplyAccumulate(q0, subgroupMatrixLoad<Right>(&tile, 16u * SA, true, SA), s1);
    s1 = subgroupMatrixMultiplyAccumulate(q1, subgroupMatrixLoad<Right>(&tile, 16u * SA + 16u, true, SA), s1);
    s1 = subgroupMatrixMultiplyAccumulate(q2, subgroupMatrixLoad<Right>(&tile, 16u * SA + 32u, true, SA), s1);
    s1 = subgroupMatrixMultiplyAccumulate(q3, subgroupMatrixLoad<Right>(&tile, 16u * SA + 48u, true, SA), s1);
    s1 = subgroupMatrixMultiplyAccumulate(q4, subgroupMatrixLoad<Right>(&tile, 16u * SA + 64u, true, SA), s1);
    s1 = subgroupMatrixMultiplyAccumulate(q5, subgroupMatrixLoad<Right>(&tile, 16u * SA + 80u, true, SA), s1);
    s1 = subgroupMatrixMultiplyAccumulate(q6, subgroupMatrixLoad<Right>(&tile, 16u * SA + 96u, true, SA), s1);
    s1 = subgroupMatrixMultiplyAccumulate(q7,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 112u, true, SA), s1);
    s2 = subgroupMatrixMultiplyAccumulate(q0, subgroupMatrixLoad<Right>(&tile, 32u * SA, true, SA), s2);
    s2 = subgroupMatrixMultiplyAccumulate(q1, subgroupMatrixLoad<Right>(&tile, 32u * SA + 16u, true, SA), s2);
    s2 = subgroupMatrixMultiplyAccumulate(q2, subgroupMatrixLoad<Right>(&tile, 32u * SA + 32u, true, SA), s2);
    s2 = subgroupMatrixMultiplyAccumulate(q3, subgroupMatrixLoad<Right>(&tile, 32u * SA + 48u, true, SA), s2);
    s2 = subgroupMatrixMultiplyAccumulate(q4, subgroupMatrixLoad<Right>(&tile, 32u * SA + 64u, true, SA), s2);
    s2 = subgroupMatrixMultiplyAccumulate(q5, subgroupMatrixLoad<Right>(&tile, 32u * SA + 80u, true, SA), s2);
    s2 = subgroupMatrixMultiplyAccumulate(q6, subgroupMatrixLoad<Right>(&tile, 32u * SA + 96u, true, SA), s2);
    s2 = subgroupMatrixMultiplyAccumulate(q7,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 112u, true, SA), s2);
    s3 = subgroupMatrixMultiplyAccumulate(q0, subgroupMatrixLoad<Right>(&tile, 48u * SA, true, SA), s3);
    s3 = subgroupMatrixMultiplyAccumulate(q1, subgroupMatrixLoad<Right>(&tile, 48u * SA + 16u, true, SA), s3);
    s3 = subgroupMatrixMultiplyAccumulate(q2, subgroupMatrixLoad<Right>(&tile, 48u * SA + 32u, true, SA), s3);
    s3 = subgroupMatrixMultiplyAccumulate(q3, subgroupMatrixLoad<Right>(&tile, 48u * SA + 48u, true, SA), s3);
    s3 = subgroupMatrixMultiplyAccumulate(q4, subgroupMatrixLoad<Right>(&tile, 48u * SA + 64u, true, SA), s3);
    s3 = subgroupMatrixMultiplyAccumulate(q5, subgroupMatrixLoad<Right>(&tile, 48u * SA + 80u, true, SA), s3);
    s3 = subgroupMatrixMultiplyAccumulate(q6, subgroupMatrixLoad<Right>(&tile, 48u * SA + 96u, true, SA), s3);
    s3 = subgroupMatrixMultiplyAccumulate(q7,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 112u, true, SA), s3);
    subgroupMatrixStore(&ss, sid * 16u * SS, s0, false, SS);
    subgroupMatrixStore(&ss, sid * 16u * SS + 16u, s1, false, SS);
    subgroupMatrixStore(&ss, sid * 16u * SS + 32u, s2, false, SS);
    subgroupMatrixStore(&ss, sid * 16u * SS + 48u, s3, false, SS);
    workgroupBarrier();   // S stored; K read by every subgroup
    put(lid, pv);
    // The lane's 32 scores (chunk c: keys kt + 8c + 4hf ..), masked and scaled.
    let j = vec4<u32>(kt + hf * 4u) + vec4<u32>(0u, 1u, 2u, 3u);
    let neg = vec4<f32>(-3.0e38);
    let e0 = select(neg, vec4<f32>(ss[sb], ss[sb + 1u], ss[sb + 2u], ss[sb + 3u]) * params.scale,
                    seen(j, pos) & vec4<bool>(real));
    let e1 = select(neg, vec4<f32>(ss[sb + 8u], ss[sb + 9u], ss[sb + 10u], ss[sb + 11u]) * params.scale,
                    seen(j + vec4<u32>(8u), pos) & vec4<bool>(real));
    let e2 = select(neg, vec4<f32>(ss[sb + 16u], ss[sb + 17u], ss[sb + 18u], ss[sb + 19u]) * params.scale,
                    seen(j + vec4<u32>(16u), pos) & vec4<bool>(real));
    let e3 = select(neg, vec4<f32>(ss[sb + 24u], ss[sb + 25u], ss[sb + 26u], ss[sb + 27u]) * params.scale,
                    seen(j + vec4<u32>(24u), pos) & vec4<bool>(real));
    let e4 = select(neg, vec4<f32>(ss[sb + 32u], ss[sb + 33u], ss[sb + 34u], ss[sb + 35u]) * params.scale,
                    seen(j + vec4<u32>(32u), pos) & vec4<bool>(real));
    let e5 = select(neg, vec4<f32>(ss[sb + 40u], ss[sb + 41u], ss[sb + 42u], ss[sb + 43u]) * params.scale,
                    seen(j + vec4<u32>(40u), pos) & vec4<bool>(real));
    let e6 = select(neg, vec4<f32>(ss[sb + 48u], ss[sb + 49u], ss[sb + 50u], ss[sb + 51u]) * params.scale,
                    seen(j + vec4<u32>(48u), pos) & vec4<bool>(real));
    let e7 = select(neg, vec4<f32>(ss[sb + 56u], ss[sb + 57u], ss[sb + 58u], ss[sb + 59u]) * params.scale,
                    seen(j + vec4<u32>(56u), pos) & vec4<bool>(real));
    let x = max(max(max(e0, e1), max(e2, e3)), max(max(e4, e5), max(e6, e7)));
    var mx = max(max(x.x, x.y), max(x.z, x.w));
    mx = max(mx, subgroupShuffleXor(mx, 1u));
    // A row's reference moves to its max only past m + TAU; from M0 (nothing summed yet) O needs no rescale.
    let grow = mx > m + TAU;
    let alpha = select(1.0, exp(m - mx), grow);
    let rescale = grow && m > M0;
    m = select(m, mx, grow);
    let mv = vec4<f32>(m);
    let p0 = exp(e0 - mv); let p1 = exp(e1 - mv); let p2 = exp(e2 - mv); let p3 = exp(e3 - mv);
    let p4 = exp(e4 - mv); let p5 = exp(e5 - mv); let p6 = exp(e6 - mv); let p7 = exp(e7 - mv);
    let ps = ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7));
    l = l * alpha + ((ps.x + ps.y) + (ps.z + ps.w));
    let h0 = vec4<f16>(p0); let h1 = vec4<f16>(p1); let h2 = vec4<f16>(p2); let h3 = vec4<f16>(p3);
    let h4 = vec4<f16>(p4); let h5 = vec4<f16>(p5); let h6 = vec4<f16>(p6); let h7 = vec4<f16>(p7);
    sp[pb] = h0.x; sp[pb + 1u] = h0.y; sp[pb + 2u] = h0.z; sp[pb + 3u] = h0.w;
    sp[pb + 8u] = h1.x; sp[pb + 9u] = h1.y; sp[pb + 10u] = h1.z; sp[pb + 11u] = h1.w;
    sp[pb + 16u] = h2.x; sp[pb + 17u] = h2.y; sp[pb + 18u] = h2.z; sp[pb + 19u] = h2.w;
    sp[pb + 24u] = h3.x; sp[pb + 25u] = h3.y; sp[pb + 26u] = h3.z; sp[pb + 27u] = h3.w;
    sp[pb + 32u] = h4.x; sp[pb + 33u] = h4.y; sp[pb + 34u] = h4.z; sp[pb + 35u] = h4.w;
    sp[pb + 40u] = h5.x; sp[pb + 41u] = h5.y; sp[pb + 42u] = h5.z; sp[pb + 43u] = h5.w;
    sp[pb + 48u] = h6.x; sp[pb + 49u] = h6.y; sp[pb + 50u] = h6.z; sp[pb + 51u] = h6.w;
    sp[pb + 56u] = h7.x; sp[pb + 57u] = h7.y; sp[pb + 58u] = h7.z; sp[pb + 59u] = h7.w;
    let moved = subgroupAny(rescale);
    if (lane == 0u) { grew[sid] = select(0u, 1u, moved); }
    // P and V staged, and whether any row of the workgroup moved its reference (one barrier for all).
    let g = workgroupUniformLoad(&grew);
    if ((g[0] | g[1] | g[2] | g[3]) != 0u) {
      // O · alpha per row, four fragments at a time through S's place (rows that kept theirs: alpha 1).
      subgroupMatrixStore(&ss, sid * 16u * SS, o0, false, SS);
      subgroupMatrixStore(&ss, sid * 16u * SS + 16u, o1, false, SS);
      subgroupMatrixStore(&ss, sid * 16u * SS + 32u, o2, false, SS);
      subgroupMatrixStore(&ss, sid * 16u * SS + 48u, o3, false, SS);
      workgroupBarrier();
      for (var c = 0u; c < 32u; c++) { ss[sb + (c / 4u) * 8u + c % 4u] *= alpha; }
      workgroupBarrier();
      o0 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS, false, SS);
      o1 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS + 16u, false, SS);
      o2 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS + 32u, false, SS);
      o3 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS + 48u, false, SS);
      workgroupBarrier();
      subgroupMatrixStore(&ss, sid * 16u * SS, o4, false, SS);
      subgroupMatrixStore(&ss, sid * 16u * SS + 16u, o5, false, SS);
      subgroupMatrixStore(&ss, sid * 16u * SS + 32u, o6, false, SS);
      subgroupMatrixStore(&ss, sid * 16u * SS + 48u, o7, false, SS);
      workgroupBarrier();
      for (var c = 0u; c < 32u; c++) { ss[sb + (c / 4u) * 8u + c % 4u] *= alpha; }
      workgroupBarrier();
      o4 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS, false, SS);
      o5 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS + 16u, false, SS);
      o6 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS + 32u, false, SS);
      o7 = subgroupMatrixLoad<Acc>(&ss, sid * 16u * SS + 48u, false, SS);
    }
    if (kt + 64u < kmax) { pk = fetch(lid, kt + 64u, kmax, prow, pstride, kvh, 0u); }
    // O += P·V: P's key fragment f (left) times V's rows 16f .. (right) for each dim fragment.
    let f0 = subgroupMatrixLoad<Left>(&sp, sid * 16u * SP, false, SP);
    let f1 = subgroupMatrixLoad<Left>(&sp, sid * 16u * SP + 16u, false, SP);
    let f2 = subgroupMatrixLoad<Left>(&sp, sid * 16u * SP + 32u, false, SP);
    let f3 = subgroupMatrixLoad<Left>(&sp, sid * 16u * SP + 48u, false, SP);
    o0 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 0u, false, SA), o0);
    o0 = subgroupMatrixMultiplyAccumulate(f1, subgroupMatrixLoad<Right>(&tile, 16u * SA, false, SA), o0);
    o0 = subgroupMatrixMultiplyAccumulate(f2, subgroupMatrixLoad<Right>(&tile, 32u * SA, false, SA), o0);
    o0 = subgroupMatrixMultiplyAccumulate(f3, subgroupMatrixLoad<Right>(&tile, 48u * SA, false, SA), o0);
    o1 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 16u, false, SA), o1);
    o1 = subgroupMatrixMultiplyAccumulate(f1,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 16u, false, SA), o1);
    o1 = subgroupMatrixMultiplyAccumulate(f2,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 16u, false, SA), o1);
    o1 = subgroupMatrixMultiplyAccumulate(f3,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 16u, false, SA), o1);
    o2 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 32u, false, SA), o2);
    o2 = subgroupMatrixMultiplyAccumulate(f1,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 32u, false, SA), o2);
    o2 = subgroupMatrixMultiplyAccumulate(f2,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 32u, false, SA), o2);
    o2 = subgroupMatrixMultiplyAccumulate(f3,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 32u, false, SA), o2);
    o3 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 48u, false, SA), o3);
    o3 = subgroupMatrixMultiplyAccumulate(f1,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 48u, false, SA), o3);
    o3 = subgroupMatrixMultiplyAccumulate(f2,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 48u, false, SA), o3);
    o3 = subgroupMatrixMultiplyAccumulate(f3,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 48u, false, SA), o3);
    o4 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 64u, false, SA), o4);
    o4 = subgroupMatrixMultiplyAccumulate(f1,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 64u, false, SA), o4);
    o4 = subgroupMatrixMultiplyAccumulate(f2,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 64u, false, SA), o4);
    o4 = subgroupMatrixMultiplyAccumulate(f3,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 64u, false, SA), o4);
    o5 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 80u, false, SA), o5);
    o5 = subgroupMatrixMultiplyAccumulate(f1,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 80u, false, SA), o5);
    o5 = subgroupMatrixMultiplyAccumulate(f2,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 80u, false, SA), o5);
    o5 = subgroupMatrixMultiplyAccumulate(f3,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 80u, false, SA), o5);
    o6 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 96u, false, SA), o6);
    o6 = subgroupMatrixMultiplyAccumulate(f1,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 96u, false, SA), o6);
    o6 = subgroupMatrixMultiplyAccumulate(f2,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 96u, false, SA), o6);
    o6 = subgroupMatrixMultiplyAccumulate(f3,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 96u, false, SA), o6);
    o7 = subgroupMatrixMultiplyAccumulate(f0, subgroupMatrixLoad<Right>(&tile, 112u, false, SA), o7);
    o7 = subgroupMatrixMultiplyAccumulate(f1,
      subgroupMatrixLoad<Right>(&tile, 16u * SA + 112u, false, SA), o7);
    o7 = subgroupMatrixMultiplyAccumulate(f2,
      subgroupMatrixLoad<Right>(&tile, 32u * SA + 112u, false, SA), o7);
    o7 = subgroupMatrixMultiplyAccumulate(f3,
      subgroupMatrixLoad<Right>(&tile, 48u * SA + 112u, false, SA), o7);
  }

  // O / l out through S's place, dims 0–63 then 64–127; rows past the segment are not written.
  let inv = 1.0 / (l + subgroupShuffleXor(l, 1u));
  let ob = ((params.row0 + ib + r) * params.nq + h) * HD + hf * 4u;
  workgroupBarrier();
  subgroupMatrixStore(&ss, sid * 16u * SS, o0, false, SS);
  subgroupMatrixStore(&ss, sid * 16u * SS + 16u, o1, false, SS);
  subgroupMatrixStore(&ss, sid * 16u * SS + 32u, o2, false, SS);
  subgroupMatrixStore(&ss, sid * 16u * SS + 48u, o3, false, SS);
  workgroupBarrier();
  if (real) {
    for (var c = 0u; c < 32u; c++) {
      let at = (c / 4u) * 8u + c % 4u;
      out[ob + at] = ss[sb + at] * inv;
    }
  }
  workgroupBarrier();
  subgroupMatrixStore(&ss, sid * 16u * SS, o4, false, SS);
  subgroupMatrixStore(&ss, sid * 16u * SS + 16u, o5, false, SS);
  subgroupMatrixStore(&ss, sid * 16u * SS + 32u, o6, false, SS);
  subgroupMatrixStore(&ss, sid * 16u * SS + 48u, o7, false, SS);
  workgroupBarrier();
  if (real) {
    for (var c = 0u; c < 32u; c++) {
      let at = (c / 4u) * 8u + c % 4u;
      out[ob + 64u + at] = ss[sb + at] * inv;
    }
  }
}

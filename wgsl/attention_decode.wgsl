// Decode attention over the paged KV cache, split along the keys (flash-decoding), first half:
//   for row r, kv head h, split s: keys j in [s·SPLIT, min((s+1)·SPLIT, pos_r + 1)), the G = nq/nkv query heads
//   of h (GQA: each K/V row is read once for all G heads):
//     m = max_j q·k_j·scale,  l = Σ_j e^(q·k_j·scale − m),  o = Σ_j e^(q·k_j·scale − m) · v_j
//   written unnormalised; attention_combine.wgsl merges the splits in order. A row whose keys fit in one
//   split writes its normalised output straight to `out` (the combine pass then skips it, or is not run).
// Bindings:  rows  (R)                      step rows: pos, slot
//            q     (R, nq·hd) act
//            pages (slots, max_pages) u32
//            kv    (pages, 2, nkv, ps, hd) act, read 8 values per load
//            opart (R, nq, max_split, hd) f32
//            ml    (R, nq, max_split) vec2<f32>  (m, l)
//            out   (R, nq·hd) f32                 (rows with a single split)
// Grid: (n rows, nkv, splits); splits = ceil(longest KV / SPLIT), splits past a row's length exit at once.
// Workgroup: WG lanes = KG key groups × L lanes, L = HD/8. A group walks keys grp, grp+KG, ... in one pass:
// its lanes each load 8 dims of the K and V rows (16 B, coalesced), sum the dot products across the group
// (subgroup shuffles), and keep an online softmax (running max, sum, output) per query head. The KG group
// states are then merged in a fixed order: shuffles inside a subgroup, workgroup memory across subgroups.
#include "lib/common.wgsl"

override HD: u32 = 128;      // head dim
override SPLIT: u32 = 256;   // keys per split
override WG: u32 = 128;
override SG: u32 = 32;       // subgroup size the merge assumes (≥ L)
override L: u32 = HD / 8u;   // lanes per key row
override KG: u32 = WG / L;   // key rows in flight
const G: u32 = {{G}}u;       // query heads per kv head (a define: it sizes per-lane arrays)

struct Params {
  row0: u32,       // first step row handled
  nq: u32,         // query heads
  nkv: u32,        // kv heads
  ps: u32,         // page size (tokens)
  max_pages: u32,  // page-table row length
  max_split: u32,  // split capacity of opart/ml
  scale: f32,      // softmax scale, usually hd^-0.5
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> q: array<act>;
@group(0) @binding(3) var<storage, read> pages: array<u32>;
#ifdef F16
@group(0) @binding(4) var<storage, read> kv: array<vec4<u32>>;
#else
@group(0) @binding(4) var<storage, read> kv: array<vec4<f32>>;
#endif
@group(0) @binding(5) var<storage, read_write> opart: array<f32>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

#ifdef LANE_SUBGROUP
override NS: u32 = WG / SG;  // merge slots: one per subgroup
#else
override NS: u32 = 1u;       // merge slot: groups fold into it one after another
var<workgroup> sm_dot: array<f32, WG * G>;
#endif
var<workgroup> sm_ml: array<vec2<f32>, G * NS>;
var<workgroup> sm_o: array<vec4<f32>, 2u * G * NS * L>;

struct Kv8 { a: vec4<f32>, b: vec4<f32> }

// 8 values of the cache starting at element e (a multiple of 8).
fn kv8(e: u32) -> Kv8 {
#ifdef F16
  let v = kv[e / 8u];
  return Kv8(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)), vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));
#else
  return Kv8(kv[e / 4u], kv[e / 4u + 1u]);
#endif
}

// Merge (m2, l2, o2) into (m, l, o): the standard combination of two online-softmax states.
struct St { m: f32, l: f32, a: vec4<f32>, b: vec4<f32> }
fn merge(x: St, y: St) -> St {
  let mn = max(x.m, y.m);
  let c1 = exp(x.m - mn);
  let c2 = exp(y.m - mn);
  return St(mn, x.l * c1 + y.l * c2, x.a * c1 + y.a * c2, x.b * c1 + y.b * c2);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.x;
  let h = wid.y;
  let s = wid.z;
  let row = rows[r];
  let len = row.pos + 1u;
  let j0 = s * SPLIT;
  if (j0 >= len) { return; }
  let nj = min(SPLIT, len - j0);
  let nq = params.nq;
  let nkv = params.nkv;
  let ps = params.ps;
  let pstride = 2u * nkv * ps * HD;  // elements per page
  let prow = row.slot * params.max_pages;
  let grp = lid / L;
  let lane = lid % L;
  let d0 = lane * 8u;

  // This lane's 8 dims of every query head, pre-scaled.
  var qa: array<vec4<f32>, G>;
  var qb: array<vec4<f32>, G>;
  for (var g = 0u; g < G; g++) {
    let o = r * nq * HD + (h * G + g) * HD + d0;
    qa[g] = vec4<f32>(f32(q[o]), f32(q[o + 1u]), f32(q[o + 2u]), f32(q[o + 3u])) * params.scale;
    qb[g] = vec4<f32>(f32(q[o + 4u]), f32(q[o + 5u]), f32(q[o + 6u]), f32(q[o + 7u])) * params.scale;
  }

  // One pass over this group's keys with an online softmax per head.
  var m: array<f32, G>;
  var l: array<f32, G>;
  var oa: array<vec4<f32>, G>;
  var ob: array<vec4<f32>, G>;
  for (var g = 0u; g < G; g++) { m[g] = -3.0e38; l[g] = 0.0; oa[g] = vec4<f32>(0.0); ob[g] = vec4<f32>(0.0); }
  for (var t0 = 0u; t0 < nj; t0 += KG) {
    let t = t0 + grp;
    let valid = t < nj;
    let j = j0 + min(t, nj - 1u);
    let kb = pages[prow + j / ps] * pstride + h * ps * HD + (j % ps) * HD + d0;
    let k = kv8(kb);
    let v = kv8(kb + nkv * ps * HD);  // V lives nkv·ps·hd after K in the page
    var dots: array<f32, G>;
    for (var g = 0u; g < G; g++) { dots[g] = dot(qa[g], k.a) + dot(qb[g], k.b); }
    // Sum the L lanes of the group: shuffles inside a subgroup, or workgroup memory.
#ifdef LANE_SUBGROUP
    for (var g = 0u; g < G; g++) {
      for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) { dots[g] += subgroupShuffleXor(dots[g], mask); }
    }
#else
    for (var g = 0u; g < G; g++) { sm_dot[lid * G + g] = dots[g]; }
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      var p = 0.0;
      for (var i = 0u; i < L; i++) { p += sm_dot[(grp * L + i) * G + g]; }
      dots[g] = p;
    }
    workgroupBarrier();
#endif
    if (valid) {
      for (var g = 0u; g < G; g++) {
        let mn = max(m[g], dots[g]);
        let c = exp(m[g] - mn);
        let p = exp(dots[g] - mn);
        l[g] = l[g] * c + p;
        oa[g] = oa[g] * c + p * v.a;
        ob[g] = ob[g] * c + p * v.b;
        m[g] = mn;
      }
    }
  }

  // Merge the KG group states in a fixed order.
#ifdef LANE_SUBGROUP
  let per_sg = SG / L;
  for (var mask = L; mask < SG; mask = mask << 1u) {
    for (var g = 0u; g < G; g++) {
      let o = merge(St(m[g], l[g], oa[g], ob[g]), St(subgroupShuffleXor(m[g], mask), subgroupShuffleXor(l[g], mask),
                    subgroupShuffleXor(oa[g], mask), subgroupShuffleXor(ob[g], mask)));
      m[g] = o.m; l[g] = o.l; oa[g] = o.a; ob[g] = o.b;
    }
  }
  if (grp % per_sg == 0u) {
    let slot = grp / per_sg;
    for (var g = 0u; g < G; g++) {
      if (lane == 0u) { sm_ml[g * NS + slot] = vec2<f32>(m[g], l[g]); }
      sm_o[((g * NS + slot) * L + lane) * 2u] = oa[g];
      sm_o[((g * NS + slot) * L + lane) * 2u + 1u] = ob[g];
    }
  }
  workgroupBarrier();
#else
  // Fold the groups into slot 0 one after another: read (barrier) write (barrier).
  for (var gi = 0u; gi < KG; gi++) {
    var merged: array<St, G>;
    if (grp == gi) {
      for (var g = 0u; g < G; g++) {
        merged[g] = St(m[g], l[g], oa[g], ob[g]);
        if (gi > 0u) {
          merged[g] = merge(St(sm_ml[g].x, sm_ml[g].y, sm_o[(g * L + lane) * 2u], sm_o[(g * L + lane) * 2u + 1u]), merged[g]);
        }
      }
    }
    workgroupBarrier();
    if (grp == gi) {
      for (var g = 0u; g < G; g++) {
        if (lane == 0u) { sm_ml[g] = vec2<f32>(merged[g].m, merged[g].l); }
        sm_o[(g * L + lane) * 2u] = merged[g].a;
        sm_o[(g * L + lane) * 2u + 1u] = merged[g].b;
      }
    }
    workgroupBarrier();
  }
#endif
  // Lanes finish one head's 8 dims each: merge the slots in order, write the split's partial.
  for (var idx = lid; idx < G * L; idx += WG) {
    let g = idx / L;
    let ln = idx % L;
    var st = St(-3.0e38, 0.0, vec4<f32>(0.0), vec4<f32>(0.0));
    for (var i = 0u; i < NS; i++) {
      st = merge(st, St(sm_ml[g * NS + i].x, sm_ml[g * NS + i].y, sm_o[((g * NS + i) * L + ln) * 2u], sm_o[((g * NS + i) * L + ln) * 2u + 1u]));
    }
    if (len <= SPLIT) {
      let ob = (r * nq + h * G + g) * HD + ln * 8u;
      for (var c = 0u; c < 4u; c++) {
        out[ob + c] = st.a[c] / st.l;
        out[ob + 4u + c] = st.b[c] / st.l;
      }
      continue;
    }
    let base = (r * nq + h * G + g) * params.max_split + s;
    if (ln == 0u) { ml[base] = vec2<f32>(st.m, st.l); }
    for (var c = 0u; c < 4u; c++) {
      opart[base * HD + ln * 8u + c] = st.a[c];
      opart[base * HD + ln * 8u + 4u + c] = st.b[c];
    }
  }
}

// Decode attention over the paged KV cache, split along the keys (flash-decoding), first half:
//   for row r, kv head h, split s: keys j in [s·SPLIT, min((s+1)·SPLIT, pos_r + 1)), up to four query heads
//   of h at once (GQA: each K/V row is read once for them):
//     m = max_j q·k_j·scale,  l = Σ_j e^(q·k_j·scale − m),  o = Σ_j e^(q·k_j·scale − m) · v_j
//   written unnormalised; attention_combine.wgsl merges the splits in order. A row whose keys fit in one
//   split writes its normalised output straight to `out` (the combine pass then skips it, or is not run).
// ROPE (decode rows of the engine): q is the raw QKV projection; the kernel first does rope.wgsl's work
//   for its heads (Q/K norm under QK_NORM, RoPE, q rounded to act), and the split holding position pos
//   writes that position's K and V into the cache before reading it (one dispatch per layer fewer).
// Bindings:  rows  (R)                      step rows: pos, slot
//            q     (R, nq·hd) act, or under ROPE (R, (nq + 2·nkv)·hd) act (the QKV projection)
//            inv_freq (rot/2) f32, qn/kn (hd) f32   (ROPE, QK_NORM)
//            pages (slots, max_pages) u32
//            kv    (pages, 2, nkv, ps, hd) act, read 8 values per load
//                  KV8: the same layout as q8 codes (8 per load), kvs (pages, 2, nkv, ps, hd/QB) f32 scales
//            opart (R, nq, max_split, hd) f32
//            ml    (R, nq, max_split) vec2<f32>  (m, l)
//            out   (R, nq·hd) f32                 (rows with a single split)
// Grid: (n rows, nkv · ceil(G/4), splits); splits = ceil(longest KV / SPLIT); splits past a row's length
// exit at once. Workgroup: WG lanes = KG key groups × L lanes, L = HD/8. A group walks keys grp, grp+KG, ...
// two at a time in one pass: its lanes each load 8 dims of the K and V rows (16 B, coalesced), sum the four
// heads' dot products across the group (one vec4 shuffle), and keep the four online softmaxes as vec4s
// (per-head state in named vec4s, not arrays: arrays indexed in loops end up in local memory). The KG group
// states are then merged in a fixed order: shuffles inside a subgroup, workgroup memory across subgroups.
// FOUR_KEYS_PER_STEP (subgroups; f16 or q8 cache): four keys per step from raw cache words instead
// (lib/decode_keys4.wgsl), and rows past params.long_len take splits of 2·SPLIT keys.
// WINDOW (sliding window, params.window): a row sees keys len − window ≤ j < len only, so a split walks
// [max(s·SPLIT, len − window), its end) and one wholly before the window returns at once (writing nothing:
// attention_combine.wgsl skips it alike). Out-of-window keys are never read, so nothing needs masking.
#include "lib/common.wgsl"
#ifdef KV8
#include "lib/kv8.wgsl"
#endif

override HD: u32 = 128;      // head dim
override G: u32 = 1;         // query heads per kv head
override SPLIT: u32 = 256;   // keys per split (2·SPLIT in rows longer than params.long_len)
override WG: u32 = 128;
override SG: u32 = 32;       // subgroup size the merge assumes (≥ L)
override L: u32 = HD / 8u;   // lanes per key row
override KG: u32 = WG / L;   // key rows in flight
#ifdef LANE_SUBGROUP
override NS: u32 = WG / SG;  // merge slots: one per subgroup
#else
override NS: u32 = KG;       // merge slots: one per group
var<workgroup> sm_dot: array<vec4<f32>, WG>;
var<workgroup> sm_dot2: array<vec4<f32>, WG>;
#endif

struct Params {
  row0: u32,       // first step row handled
  nq: u32,         // query heads
  nkv: u32,        // kv heads
  ps: u32,         // page size (tokens)
  max_pages: u32,  // page-table row length
  max_split: u32,  // split capacity of opart/ml
  scale: f32,      // softmax scale, usually hd^-0.5
  min_len: u32,    // rows whose KV length (pos + 1) lies outside [min_len, max_len] are left to another
  max_len: u32,    //   dispatch (the ROPE variant takes the short rows)
  long_len: u32,   // rows with more keys take 2·SPLIT keys per split (lib/decode_split.wgsl)
#ifdef ROPE
  rot: u32,        // rotated dims (even, ≤ hd)
  eps: f32,        // QK norm epsilon
  mscale: f32,     // RoPE attention factor
#endif
#ifdef WINDOW
  window: u32,     // sliding window (keys per row, its own included), ≥ 1
#endif
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> q: array<act>;
@group(0) @binding(3) var<storage, read> pages: array<u32>;
// KV_ACCESS: read_write under ROPE (it writes the new K/V), read otherwise.
#ifdef KV8
@group(0) @binding(4) var<storage, {{KV_ACCESS}}> kv: array<vec2<u32>>;
@group(0) @binding(11) var<storage, {{KV_ACCESS}}> kvs: array<f32>;
#elif F16
@group(0) @binding(4) var<storage, {{KV_ACCESS}}> kv: array<vec4<u32>>;
#else
@group(0) @binding(4) var<storage, {{KV_ACCESS}}> kv: array<vec4<f32>>;
#endif
@group(0) @binding(5) var<storage, read_write> opart: array<f32>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

// Page ids of this split (one dependent global load less per key).
var<workgroup> sm_pages: array<u32, 64>;
// Merge slots: m and l of the 4 heads, and 8 dims × 4 heads per lane.
var<workgroup> sm_m: array<vec4<f32>, NS>;
var<workgroup> sm_l: array<vec4<f32>, NS>;
var<workgroup> sm_o: array<vec4<f32>, NS * L * 8u>;

struct Kv8 { a: vec4<f32>, b: vec4<f32> }

fn kv8(e: u32) -> Kv8 {
#ifdef KV8
  let w = kv[e / 8u];
  let sc = kvs[e / QB];
  return Kv8(kv8_unpack(w.x, sc), kv8_unpack(w.y, sc));
#elif F16
  let v = kv[e / 8u];
  return Kv8(vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y)),
             vec4<f32>(unpack2x16float(v.z), unpack2x16float(v.w)));
#else
  return Kv8(kv[e / 4u], kv[e / 4u + 1u]);
#endif
}

// Element offset of key j's K row (this lane's dims at `hoff` in the head): its page from the split's page
// list (pages p0 ..), then the token within the page.
fn key_at(j: u32, p0: u32, pstride: u32, hoff: u32) -> u32 {
  return sm_pages[j / params.ps - p0] * pstride + hoff + (j % params.ps) * HD;
}

fn q8(o: u32) -> Kv8 {
  return Kv8(vec4<f32>(f32(q[o]), f32(q[o + 1u]), f32(q[o + 2u]), f32(q[o + 3u])),
             vec4<f32>(f32(q[o + 4u]), f32(q[o + 5u]), f32(q[o + 6u]), f32(q[o + 7u])));
}

// Online-softmax state of four heads: 8 dims each (a: dims 0-3, b: dims 4-7) per lane.
struct St {
  m: vec4<f32>, l: vec4<f32>,
  a0: vec4<f32>, b0: vec4<f32>, a1: vec4<f32>, b1: vec4<f32>,
  a2: vec4<f32>, b2: vec4<f32>, a3: vec4<f32>, b3: vec4<f32>,
}

fn merge(x: St, y: St) -> St {
  let mn = max(x.m, y.m);
  let c1 = exp(x.m - mn);
  let c2 = exp(y.m - mn);
  return St(mn, x.l * c1 + y.l * c2,
            x.a0 * c1.x + y.a0 * c2.x, x.b0 * c1.x + y.b0 * c2.x,
            x.a1 * c1.y + y.a1 * c2.y, x.b1 * c1.y + y.b1 * c2.y,
            x.a2 * c1.z + y.a2 * c2.z, x.b2 * c1.z + y.b2 * c2.z,
            x.a3 * c1.w + y.a3 * c2.w, x.b3 * c1.w + y.b3 * c2.w);
}

#ifdef LANE_SUBGROUP
fn shuffle(x: St, mask: u32) -> St {
  return St(subgroupShuffleXor(x.m, mask), subgroupShuffleXor(x.l, mask),
            subgroupShuffleXor(x.a0, mask), subgroupShuffleXor(x.b0, mask), subgroupShuffleXor(x.a1, mask),
            subgroupShuffleXor(x.b1, mask), subgroupShuffleXor(x.a2, mask), subgroupShuffleXor(x.b2, mask),
            subgroupShuffleXor(x.a3, mask), subgroupShuffleXor(x.b3, mask));
}
#endif

fn put(slot: u32, lane: u32, st: St) {
  if (lane == 0u) {
    sm_m[slot] = st.m;
    sm_l[slot] = st.l;
  }
  let o = (slot * L + lane) * 8u;
  sm_o[o] = st.a0; sm_o[o + 1u] = st.b0; sm_o[o + 2u] = st.a1; sm_o[o + 3u] = st.b1;
  sm_o[o + 4u] = st.a2; sm_o[o + 5u] = st.b2; sm_o[o + 6u] = st.a3; sm_o[o + 7u] = st.b3;
}
fn take(slot: u32, lane: u32) -> St {
  let o = (slot * L + lane) * 8u;
  return St(sm_m[slot], sm_l[slot], sm_o[o], sm_o[o + 1u], sm_o[o + 2u], sm_o[o + 3u], sm_o[o + 4u],
            sm_o[o + 5u], sm_o[o + 6u], sm_o[o + 7u]);
}

#ifdef ROPE
#include "lib/rope.wgsl"
#include "lib/decode_rope.wgsl"
#endif
#ifdef FOUR_KEYS_PER_STEP
#include "lib/decode_keys4.wgsl"
#endif
#include "lib/decode_split.wgsl"

fn emit(r: u32, s: u32, qh: u32, d0: u32, len: u32, m: f32, l: f32, a: vec4<f32>, b: vec4<f32>,
        write_ml: bool) {
  if (len <= split_of(len)) {
    let ob = (r * params.nq + qh) * HD + d0;
    for (var c = 0u; c < 4u; c++) {
      out[ob + c] = a[c] / l;
      out[ob + 4u + c] = b[c] / l;
    }
    return;
  }
  let base = (r * params.nq + qh) * params.max_split + s;
  if (write_ml) { ml[base] = vec2<f32>(m, l); }
  for (var c = 0u; c < 4u; c++) {
    opart[base * HD + d0 + c] = a[c];
    opart[base * HD + d0 + 4u + c] = b[c];
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = params.row0 + wid.x;
  let nhb = (G + 3u) / 4u;
  let h = wid.y / nhb;                 // kv head
  let g0 = (wid.y % nhb) * 4u;         // first query head of this block, within the kv head's G
  let s = wid.z;
  let row = rows[r];
  let len = row.pos + 1u;
  let split = split_of(len);
#ifdef WINDOW
  let j0 = max(s * split, len - min(len, params.window));
  let je = min(s * split + split, len);
  if (j0 >= je || len < params.min_len || len > params.max_len) { return; }
  let nj = je - j0;
#else
  let j0 = s * split;
  if (j0 >= len || len < params.min_len || len > params.max_len) { return; }
  let nj = min(split, len - j0);
#endif
  let nq = params.nq;
  let nkv = params.nkv;
  let ps = params.ps;
  let pstride = 2u * nkv * ps * HD;
  let prow = row.slot * params.max_pages;
  let grp = lid / L;
  let lane = lid % L;
  let d0 = lane * 8u;


  var st = St(vec4<f32>(-3.0e38), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
              vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  let p0 = j0 / ps;
  let np = (j0 + nj - 1u) / ps - p0 + 1u;
  for (var i = lid; i < np; i += WG) { sm_pages[i] = pages[prow + p0 + i]; }
  workgroupBarrier();
  let pvoff = nkv * ps * HD;  // V lives nkv·ps·hd after K in the page
  let hoff = h * ps * HD + d0;
  // Two key rows per group per iteration (t and t + KG), both fetched one iteration ahead (software
  // pipelining: twice the bytes in flight, half the dependent steps of the online softmax).
  var ja = j0 + min(grp, nj - 1u);
  var jb = j0 + min(grp + KG, nj - 1u);
  var kba = key_at(ja, p0, pstride, hoff);
  var kbb = key_at(jb, p0, pstride, hoff);
  // Four query heads (clamped: heads past G are computed and dropped).
#ifdef ROPE
  // A split without the new key issues its first loads before the preparation, whose latency then hides
  // behind them; the split holding it loads after writing it.
  let pos = row.pos;
  let own_k = s == pos / split;
#ifdef FOUR_KEYS_PER_STEP
  var nx: Pre4;
  if (!own_k) { nx = fetch4(grp, j0, nj, p0, pstride, hoff, pvoff); }
#else
  var kna: Kv8;
  var vna: Kv8;
  var knb: Kv8;
  var vnb: Kv8;
  if (!own_k) {
    kna = kv8(kba);
    vna = kv8(kba + pvoff);
    knb = kv8(kbb);
    vnb = kv8(kbb + pvoff);
  }
#endif
  prepare(r, h, g0, grp, lane, lid, pos, own_k,
          sm_pages[min(pos / ps - p0, 63u)] * pstride + hoff + (pos % ps) * HD, pvoff);
  if (own_k) {
#ifdef FOUR_KEYS_PER_STEP
    nx = fetch4(grp, j0, nj, p0, pstride, hoff, pvoff);
#else
    kna = kv8(kba);
    vna = kv8(kba + pvoff);
    knb = kv8(kbb);
    vnb = kv8(kbb + pvoff);
#endif
  }
  let q0 = sm8(d0);
  let q1 = sm8(HD + d0);
  let q2 = sm8(2u * HD + d0);
  let q3 = sm8(3u * HD + d0);
#else
  let qbase = r * nq * HD + h * G * HD + d0;
  let q0 = q8(qbase + min(g0, G - 1u) * HD);
  let q1 = q8(qbase + min(g0 + 1u, G - 1u) * HD);
  let q2 = q8(qbase + min(g0 + 2u, G - 1u) * HD);
  let q3 = q8(qbase + min(g0 + 3u, G - 1u) * HD);
#ifdef FOUR_KEYS_PER_STEP
  let nx = fetch4(grp, j0, nj, p0, pstride, hoff, pvoff);
#else
  var kna = kv8(kba);
  var vna = kv8(kba + pvoff);
  var knb = kv8(kbb);
  var vnb = kv8(kbb + pvoff);
#endif
#endif
  let sc = params.scale;
#ifdef FOUR_KEYS_PER_STEP
  st = walk4(st, nx, q0, q1, q2, q3, j0, nj, p0, grp, pstride, hoff, pvoff, sc);
#else
  for (var t0 = 0u; t0 < nj; t0 += 2u * KG) {
    let t = t0 + grp;
    let ka = kna;
    let va = vna;
    let kb = knb;
    let vb = vnb;
    ja = j0 + min(t + 2u * KG, nj - 1u);
    jb = j0 + min(t + 3u * KG, nj - 1u);
    kba = key_at(ja, p0, pstride, hoff);
    kbb = key_at(jb, p0, pstride, hoff);
    kna = kv8(kba);
    vna = kv8(kba + pvoff);
    knb = kv8(kbb);
    vnb = kv8(kbb + pvoff);
    var da = vec4<f32>(dot(q0.a, ka.a) + dot(q0.b, ka.b), dot(q1.a, ka.a) + dot(q1.b, ka.b),
                       dot(q2.a, ka.a) + dot(q2.b, ka.b), dot(q3.a, ka.a) + dot(q3.b, ka.b)) * sc;
    var db = vec4<f32>(dot(q0.a, kb.a) + dot(q0.b, kb.b), dot(q1.a, kb.a) + dot(q1.b, kb.b),
                       dot(q2.a, kb.a) + dot(q2.b, kb.b), dot(q3.a, kb.a) + dot(q3.b, kb.b)) * sc;
#ifdef LANE_SUBGROUP
    for (var mask = L / 2u; mask > 0u; mask = mask >> 1u) {
      da += subgroupShuffleXor(da, mask);
      db += subgroupShuffleXor(db, mask);
    }
#else
    sm_dot[lid] = da;
    sm_dot2[lid] = db;
    workgroupBarrier();
    da = vec4<f32>(0.0);
    db = vec4<f32>(0.0);
    for (var i = 0u; i < L; i++) {
      da += sm_dot[grp * L + i];
      db += sm_dot2[grp * L + i];
    }
    workgroupBarrier();
#endif
    if (t < nj) {
      // Key t + KG may lie past the split: its weight is e^-inf = 0.
      let dbm = select(db, vec4<f32>(-3.0e38), t + KG >= nj);
      let mn = max(st.m, max(da, dbm));
      let c = exp(st.m - mn);
      let pa = exp(da - mn);
      let pb = exp(dbm - mn);
      st.l = st.l * c + pa + pb;
      st.a0 = st.a0 * c.x + pa.x * va.a + pb.x * vb.a; st.b0 = st.b0 * c.x + pa.x * va.b + pb.x * vb.b;
      st.a1 = st.a1 * c.y + pa.y * va.a + pb.y * vb.a; st.b1 = st.b1 * c.y + pa.y * va.b + pb.y * vb.b;
      st.a2 = st.a2 * c.z + pa.z * va.a + pb.z * vb.a; st.b2 = st.b2 * c.z + pa.z * va.b + pb.z * vb.b;
      st.a3 = st.a3 * c.w + pa.w * va.a + pb.w * vb.a; st.b3 = st.b3 * c.w + pa.w * va.b + pb.w * vb.b;
      st.m = mn;
    }
  }
#endif

  // Merge the KG group states in a fixed order.
#ifdef LANE_SUBGROUP
  let per_sg = SG / L;
  for (var mask = L; mask < SG; mask = mask << 1u) { st = merge(st, shuffle(st, mask)); }
  if (grp % per_sg == 0u) { put(grp / per_sg, lane, st); }
#else
  put(grp, lane, st);
#endif
  workgroupBarrier();
  if (grp == 0u) {
    var f = take(0u, lane);
    for (var i = 1u; i < NS; i++) { f = merge(f, take(i, lane)); }
    let qh = h * G + g0;
    emit(r, s, qh, d0, len, f.m.x, f.l.x, f.a0, f.b0, lane == 0u);
    if (g0 + 1u < G) { emit(r, s, qh + 1u, d0, len, f.m.y, f.l.y, f.a1, f.b1, lane == 0u); }
    if (g0 + 2u < G) { emit(r, s, qh + 2u, d0, len, f.m.z, f.l.z, f.a2, f.b2, lane == 0u); }
    if (g0 + 3u < G) { emit(r, s, qh + 3u, d0, len, f.m.w, f.l.w, f.a3, f.b3, lane == 0u); }
  }
}

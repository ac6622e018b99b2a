// Shared by the MoE routers (moe_route.wgsl: any rows; moe_vec_x8.wgsl's ROUTE: one decode row, routed by
// every workgroup of its gate|up): softmax over a row's E logits, then the k largest probabilities in
// descending order (ties: the lower expert first) and their weights, / their sum under renorm (HF
// norm_topk_prob). The kernel defines MAX_E (= 4·WG at most), MAX_K, WG (a power of two) and, under
// TOPK_SUBGROUPS, SGS (the fixed subgroup size), declares the logits, ids and weights bindings, includes
// lib/reduce.wgsl (without TOPK_SUBGROUPS), then calls route_row, which returns the expert of pick `want`.
// TOPK_ONE_SUBGROUP (E ≤ 4·SGS, k ≤ SGS): every subgroup routes the row alone, lane l holding experts l,
// l + SGS, l + 2·SGS, l + 3·SGS read from the logits binding: no workgroup memory, no barrier.
// Otherwise the kernel first writes the row's logits into tk_p (before a barrier); lane l holds experts l,
// l + WG, l + 2·WG, l + 3·WG in registers and max, sum and each of the k picks are one workgroup reduction:
// subgroup operations, then the WG/SGS subgroup results in order (one barrier; the candidate slots alternate
// between picks), or, without TOPK_SUBGROUPS, fixed-order trees.

// Candidates compare as u32 keys that order like the values (subgroup min/max of u32 are single
// instructions on some GPUs, where f32 ones are shuffle trees); ties go to the lower index.
struct TopPick { k: u32, i: u32 }

fn tk_better(c: TopPick, b: TopPick) -> bool { return c.k > b.k || (c.k == b.k && c.i < b.i); }

// The key of any finite f32 (order-preserving), and back.
fn tk_key(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  return select(b | 0x80000000u, ~b, (b >> 31u) == 1u);
}
fn tk_unkey(k: u32) -> f32 { return bitcast<f32>(select(~k, k & 0x7fffffffu, (k >> 31u) == 1u)); }

// The key of a probability (≥ 0); 0 for the negative markers (chosen, past E): below every probability.
fn tk_pkey(p: f32) -> u32 { return select(0u, bitcast<u32>(p) + 1u, p >= 0.0); }

// The lane's best probability key among its 4 experts (strict comparisons: the lowest expert among equals).
fn lane_best(p: vec4<f32>, e: vec4<u32>) -> TopPick {
  var b = TopPick(tk_pkey(p.x), e.x);
  if (tk_pkey(p.y) > b.k) { b = TopPick(tk_pkey(p.y), e.y); }
  if (tk_pkey(p.z) > b.k) { b = TopPick(tk_pkey(p.z), e.z); }
  if (tk_pkey(p.w) > b.k) { b = TopPick(tk_pkey(p.w), e.w); }
  return b;
}

#ifdef TOPK_ONE_SUBGROUP
// The subgroup's largest key (ties: lowest i); every lane gets it.
fn sg_best(b: TopPick) -> TopPick {
  let m = subgroupMax(b.k);
  return TopPick(m, subgroupMin(select(0xffffffffu, b.i, b.k == m)));
}

// ids[r, j] and weights[r, j] (j < k) of row r, stored by lanes 0 .. k − 1 when `store`; returns the expert
// of pick `want` to every lane. Every lane calls it (subgroup operations in uniform control flow).
fn route_row(r: u32, E: u32, k: u32, renorm: bool, lid: u32, store: bool, want: u32) -> u32 {
  let lane = lid % SGS;
  let e = vec4<u32>(lane) + vec4<u32>(0u, SGS, 2u * SGS, 3u * SGS);
  let valid = e < vec4<u32>(E);
  let c = vec4<u32>(r * E) + min(e, vec4<u32>(E - 1u));
  let l = select(vec4<f32>(-3.0e38), vec4<f32>(logits[c.x], logits[c.y], logits[c.z], logits[c.w]), valid);
  let mx = tk_unkey(subgroupMax(tk_key(max(max(l.x, l.y), max(l.z, l.w)))));
  let ex = select(vec4<f32>(0.0), exp(l - vec4<f32>(mx)), valid);
  let s = subgroupAdd(((ex.x + ex.y) + ex.z) + ex.w);
  // Probabilities; −1 marks a chosen expert, −2 a slot past E (all probabilities are ≥ 0).
  var p = select(vec4<f32>(-2.0), ex / s, valid);
  var tot = 0.0;
  var mine = TopPick(0u, 0u);
  var chosen = 0u;
  for (var j = 0u; j < k; j++) {
    let w = sg_best(lane_best(p, e));
    p = select(p, vec4<f32>(-1.0), e == vec4<u32>(w.i));
    tot += bitcast<f32>(w.k - 1u);
    if (lane == j) { mine = w; }
    if (j == want) { chosen = w.i; }
  }
  if (store && lid < k) {
    let v = bitcast<f32>(mine.k - 1u);
    ids[r * k + lid] = mine.i;
    weights[r * k + lid] = select(v, v / tot, renorm);
  }
  return chosen;
}
#else
var<workgroup> tk_p: array<f32, MAX_E>;     // the row's logits
var<workgroup> tk_ids: array<u32, MAX_K>;   // the chosen experts by rank
var<workgroup> tk_pv: array<f32, MAX_K>;    // and their probabilities

#ifdef TOPK_SUBGROUPS
var<workgroup> tk_ck: array<u32, 2u * (WG / SGS)>;   // [slot][subgroup] candidates
var<workgroup> tk_ci: array<u32, 2u * (WG / SGS)>;
var<workgroup> tk_cs: array<f32, WG / SGS>;

// The workgroup's largest key (ties: lowest i); every lane gets it.
fn tk_best(key: u32, i: u32, lid: u32, slot: u32) -> TopPick {
  let m = subgroupMax(key);
  let at = subgroupMin(select(0xffffffffu, i, key == m));
  let o = slot * (WG / SGS);
  if (lid % SGS == 0u) {
    tk_ck[o + lid / SGS] = m;
    tk_ci[o + lid / SGS] = at;
  }
  workgroupBarrier();
  var b = TopPick(tk_ck[o], tk_ci[o]);
  for (var s = 1u; s < WG / SGS; s++) {
    let c = TopPick(tk_ck[o + s], tk_ci[o + s]);
    if (tk_better(c, b)) { b = c; }
  }
  return b;
}

// Called once, between tk_best's slots 0 and 1 (its own array: no slot to alternate).
fn tk_sum(v: f32, lid: u32) -> f32 {
  let t = subgroupAdd(v);
  if (lid % SGS == 0u) { tk_cs[lid / SGS] = t; }
  workgroupBarrier();
  var s = tk_cs[0];
  for (var j = 1u; j < WG / SGS; j++) { s += tk_cs[j]; }
  return s;
}
#else
var<workgroup> tk_ck: array<u32, WG>;
var<workgroup> tk_ci: array<u32, WG>;

fn tk_best(key: u32, i: u32, lid: u32, slot: u32) -> TopPick {
  tk_ck[lid] = key;
  tk_ci[lid] = i;
  workgroupBarrier();
  for (var h = WG / 2u; h > 0u; h = h >> 1u) {
    if (lid < h) {
      let c = TopPick(tk_ck[lid + h], tk_ci[lid + h]);
      if (tk_better(c, TopPick(tk_ck[lid], tk_ci[lid]))) {
        tk_ck[lid] = c.k;
        tk_ci[lid] = c.i;
      }
    }
    workgroupBarrier();
  }
  let b = TopPick(tk_ck[0], tk_ci[0]);
  workgroupBarrier();
  return b;
}

fn tk_sum(v: f32, lid: u32) -> f32 { return wg_sum(v, lid); }
#endif

// ids[r, j] and weights[r, j] (j < k) of the row whose E logits are in tk_p (written before a barrier),
// stored when `store`; returns the expert of pick `want` to every lane. Every lane calls it.
fn route_row(r: u32, E: u32, k: u32, renorm: bool, lid: u32, store: bool, want: u32) -> u32 {
  let e = vec4<u32>(lid) + vec4<u32>(0u, WG, 2u * WG, 3u * WG);
  let valid = e < vec4<u32>(E);
  let c = min(e, vec4<u32>(E - 1u));
  let l = select(vec4<f32>(-3.0e38), vec4<f32>(tk_p[c.x], tk_p[c.y], tk_p[c.z], tk_p[c.w]), valid);
  let mx = tk_unkey(tk_best(tk_key(max(max(l.x, l.y), max(l.z, l.w))), 0u, lid, 0u).k);
  let ex = select(vec4<f32>(0.0), exp(l - vec4<f32>(mx)), valid);
  let s = tk_sum(((ex.x + ex.y) + ex.z) + ex.w, lid);
  // Probabilities; −1 marks a chosen expert, −2 a slot past E (all probabilities are ≥ 0).
  var p = select(vec4<f32>(-2.0), ex / s, valid);
  for (var j = 0u; j < k; j++) {
    let b = lane_best(p, e);
    let w = tk_best(b.k, b.i, lid, (j + 1u) & 1u);
    p = select(p, vec4<f32>(-1.0), e == vec4<u32>(w.i));
    if (lid == 0u) {
      tk_ids[j] = w.i;
      tk_pv[j] = bitcast<f32>(w.k - 1u);
    }
  }
  workgroupBarrier();
  if (store && lid < k) {
    var tot = 0.0;
    for (var j = 0u; j < k; j++) { tot += tk_pv[j]; }
    let v = tk_pv[lid];
    ids[r * k + lid] = tk_ids[lid];
    weights[r * k + lid] = select(v, v / tot, renorm);
  }
  return tk_ids[want];
}
#endif

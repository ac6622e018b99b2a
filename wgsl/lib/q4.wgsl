// The Q4 path of matmul_vec.wgsl (included after its bindings: reads x, w, scales, biases, gamma).
// A team of T lanes computes 4 adjacent columns for all M rows. Lane t takes words t, t+T, ... (8 values
// each) of the four columns, so a subgroup's loads are contiguous: 128 B of each column's weights and 1 KB
// of x per load, not one cache line per lane (x loads were the limit with 32-value units per lane). The
// next word's weights and scales are loaded before this one is used (bytes in flight); each x value feeds
// 4 columns. T may span several subgroups (K split inside the workgroup).
// Q4 without int→float conversions (slow on GPUs): OR-ing nibble k of a half-word into the mantissa of 2^23
// gives 2^23 + q·16^k exactly; products are summed per nibble position and scaled by 16^-k once per word.
#if Q4
// Per sub-team (TS lanes) partial sums: MB rows' 4-column accumulators, then the rows' Σx².
var<workgroup> part: array<vec4<f32>, (WG / TS) * (MB + 1u)>;

// 2^23 + q·16^k for the four nibbles of a half-word, minus 2^23: q·16^k exactly, no conversion.
fn magic4(h: u32) -> vec4<f32> {
  let v = (vec4<u32>(h) & vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u)) | vec4<u32>(0x4b000000u);
  return bitcast<vec4<f32>>(v) - vec4<f32>(8388608.0);
}
fn nib8lo(wd: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(wd, wd >> 4u, wd >> 8u, wd >> 12u) & vec4<u32>(15u)); }
fn nib8hi(wd: u32) -> vec4<f32> { return vec4<f32>(vec4<u32>(wd >> 16u, wd >> 20u, wd >> 24u, wd >> 28u) & vec4<u32>(15u)); }

// Σ q·x of one word (8 values) against x values in registers.
fn q4word(q: u32, x0: vec4<f32>, x1: vec4<f32>) -> f32 {
#if QMAGIC
  let pk = fma(magic4(q >> 16u), x1, magic4(q & 0xffffu) * x0);
  return dot(pk, vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625));
#else
  return dot(nib8lo(q), x0) + dot(nib8hi(q), x1);
#endif
}

fn scale_bias(n: u32, wi: u32, gpr: u32) -> vec2<f32> {
  let gi = n * gpr + (wi * 8u) / GS;
  return vec2<f32>(half_at(scales[gi >> 1u], gi), half_at(biases[gi >> 1u], gi));
}

struct RowDot { d: vec4<f32>, ss: f32 }

// One row, one word, four columns: scale·Σq·x̂ + bias·Σx̂ per column, and Σx² of the raw x (NORM).
fn q4row(xb: u32, g0: vec4<f32>, g1: vec4<f32>, q0: u32, q1: u32, q2: u32, q3: u32, sc: vec4<f32>, bi: vec4<f32>) -> RowDot {
  var x0 = x[xb];
  var x1 = x[xb + 1u];
  var ss = 0.0;
#ifdef NORM
  ss = dot(x0, x0) + dot(x1, x1);
  x0 *= g0;
  x1 *= g1;
#endif
  let sv = x0 + x1;
  let sx = (sv.x + sv.y) + (sv.z + sv.w);
  let d = vec4<f32>(q4word(q0, x0, x1), q4word(q1, x0, x1), q4word(q2, x0, x1), q4word(q3, x0, x1));
  return RowDot(sc * d + bi * sx, ss);
}

// Sum of v over the TS lanes of a sub-team (subgroup shuffles in a fixed order; identity when TS = 1).
fn sub_sum(v: vec4<f32>) -> vec4<f32> {
  var s = v;
#ifdef TEAM_SUBGROUP
  for (var mask = TS / 2u; mask > 0u; mask = mask >> 1u) { s += subgroupShuffleXor(s, mask); }
#endif
  return s;
}

// The team's partial sums of slot i, in sub-team order.
fn team_total(team: u32, i: u32) -> vec4<f32> {
  let P = T / TS;
  var s = part[(team * P) * (MB + 1u) + i];
  for (var p = 1u; p < P; p++) { s += part[(team * P + p) * (MB + 1u) + i]; }
  return s;
}

fn q4_team(tid: u32, lane: u32, lid: u32) {
  let K4 = params.K / 4u;
  let wpr = params.K / 8u;           // words per row
  let gpr = params.K / GS;
  let nb = tid * 4u;
  let c0 = min(nb, params.N - 1u);   // columns clamped in range: computed, never written
  let c1 = min(nb + 1u, params.N - 1u);
  let c2 = min(nb + 2u, params.N - 1u);
  let c3 = min(nb + 3u, params.N - 1u);
  let team = lid / T;
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    let r0 = (params.row0 + m0) * K4;
#if MB4
    let r1 = (params.row0 + min(m0 + 1u, params.M - 1u)) * K4;
    let r2 = (params.row0 + min(m0 + 2u, params.M - 1u)) * K4;
    let r3 = (params.row0 + min(m0 + 3u, params.M - 1u)) * K4;
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
#endif
    var a0 = vec4<f32>(0.0);
    var ss = vec4<f32>(0.0);
    let wf = min(lane, wpr - 1u);
    var q0 = w[c0 * wpr + wf];
    var q1 = w[c1 * wpr + wf];
    var q2 = w[c2 * wpr + wf];
    var q3 = w[c3 * wpr + wf];
    var s0 = scale_bias(c0, wf, gpr);
    var s1 = scale_bias(c1, wf, gpr);
    var s2 = scale_bias(c2, wf, gpr);
    var s3 = scale_bias(c3, wf, gpr);
    for (var wi = lane; wi < wpr; wi += T) {
      let wn = min(wi + T, wpr - 1u);
      let n0q = w[c0 * wpr + wn];
      let n1q = w[c1 * wpr + wn];
      let n2q = w[c2 * wpr + wn];
      let n3q = w[c3 * wpr + wn];
      let n0s = scale_bias(c0, wn, gpr);
      let n1s = scale_bias(c1, wn, gpr);
      let n2s = scale_bias(c2, wn, gpr);
      let n3s = scale_bias(c3, wn, gpr);
      let sc = vec4<f32>(s0.x, s1.x, s2.x, s3.x);
      let bi = vec4<f32>(s0.y, s1.y, s2.y, s3.y);
#ifdef NORM
      let g0 = gamma[wi * 2u];
      let g1 = gamma[wi * 2u + 1u];
#else
      let g0 = vec4<f32>(1.0);
      let g1 = vec4<f32>(1.0);
#endif
      // Row by row, the same code whatever MB is: a row's bits never depend on M.
      let d0 = q4row(r0 + wi * 2u, g0, g1, q0, q1, q2, q3, sc, bi);
      a0 += d0.d;
      ss.x += d0.ss;
#if MB4
      let d1 = q4row(r1 + wi * 2u, g0, g1, q0, q1, q2, q3, sc, bi);
      a1 += d1.d;
      ss.y += d1.ss;
      let d2 = q4row(r2 + wi * 2u, g0, g1, q0, q1, q2, q3, sc, bi);
      a2 += d2.d;
      ss.z += d2.ss;
      let d3 = q4row(r3 + wi * 2u, g0, g1, q0, q1, q2, q3, sc, bi);
      a3 += d3.d;
      ss.w += d3.ss;
#endif
      q0 = n0q;
      q1 = n1q;
      q2 = n2q;
      q3 = n3q;
      s0 = n0s;
      s1 = n1s;
      s2 = n2s;
      s3 = n3s;
    }
    // Team sum in a fixed order: shuffles inside each sub-team, then the sub-teams in order.
    let p = (lid / TS) * (MB + 1u);
    let t0 = sub_sum(a0);
#if MB4
    let t1 = sub_sum(a1);
    let t2 = sub_sum(a2);
    let t3 = sub_sum(a3);
#endif
    let tss = sub_sum(ss);
    if (lid % TS == 0u) {
      part[p] = t0;
#if MB4
      part[p + 1u] = t1;
      part[p + 2u] = t2;
      part[p + 3u] = t3;
#endif
      part[p + MB] = tss;
    }
    workgroupBarrier();
    if (lane < 4u && nb + lane < params.N) {
      let n = nb + lane;
      let sst = team_total(team, MB);
      for (var j = 0u; j < MB; j++) {
        if (m0 + j >= params.M) { break; }
        store(params.row0 + m0 + j, n, team_total(team, j)[lane] * norm_factor(sst[j]));
      }
    }
    workgroupBarrier();
  }
}
#endif

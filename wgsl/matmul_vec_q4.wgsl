// Matmul for few rows (decode) of MLX affine 4-bit weights on f32 x, bandwidth-bound: each weight is read
// once for all M rows (as matmul_vec.wgsl: same bindings, params, epilogues and fused norm).
//   y[row0 + m, n_off + n] (=|+=) Σ_k x̂[row0 + m, k] · W[n, k] (+ bias[n])      m < M, n < N
// SWIGLU: W is [gate | up]; a team's columns are gates j, j+1 and their up rows, and it writes
// h[j] = silu(gate_j)·up_j (f32, width N/2): the SwiGLU of decode rows needs no kernel of its own.
// Bindings:  x (rows, K) f32;  w (N, K/16) vec2<u32>;  scales, biases (N, K/GS) 16-bit packed in u32
//            (SCALE_F16 or bf16);  bias (N) f32 (BIAS);  gamma (K) f32 (NORM);  y (rows, ldy) act | f32
// Grid: ceil(N / (4·WG/T)) workgroups, folded 2-D. A team of T lanes computes 4 adjacent columns for all M
// rows. Lane t takes chunks t, t+T, ... of two consecutive words (16 values, inside one scale group) of the
// four columns, so a subgroup's loads are contiguous: 256 B of each column's weights and 2 KB of x per load,
// not one cache line per lane. The weights and scales of the chunk two ahead are loaded before this one is
// used; each x value feeds 4 columns. T may span several subgroups (K split inside the workgroup, so short
// rows still fill the GPU): TS lanes sum by shuffles (TEAM_SUBGROUP), the T/TS partials in order through
// workgroup memory. Rows go in blocks of MB (1 or 4; FOUR_ROW_BLOCKS with 4); row m's arithmetic never
// depends on M (batch invariance).
// 4-bit values without int→float conversions (slow on GPUs): OR-ing nibble k of a half-word into the
// mantissa of 2^23 gives 2^23 + q·16^k exactly; products are summed per nibble position and scaled by 16^-k
// once per chunk.
#include "lib/common.wgsl"
#include "lib/matmul_vec.wgsl"
#include "lib/matmul.wgsl"

override TS: u32 = 1;      // lanes of a team summed by subgroup shuffles (1 without subgroups)
const QV: u32 = 2u;        // words per chunk (16 values)
alias wq_t = vec2<u32>;    // a lane's chunk of one column
@group(0) @binding(2) var<storage, read> w: array<wq_t>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> biases: array<u32>;
// Per sub-team (TS lanes) partial sums: MB rows' 4-column accumulators, then the rows' Σx².
var<workgroup> part: array<vec4<f32>, (WG / TS) * (MB + 1u)>;

// 2^23 + q·16^k for the four nibbles of a half-word, minus 2^23: q·16^k exactly, no conversion.
fn magic4(h: u32) -> vec4<f32> {
  let v = (vec4<u32>(h) & vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u)) | vec4<u32>(0x4b000000u);
  return bitcast<vec4<f32>>(v) - vec4<f32>(8388608.0);
}
// Σ q·x of one word against its 8 x values, per nibble position (still scaled by 16^k).
fn wdot(q: u32, xa: vec4<f32>, xb: vec4<f32>, pk: vec4<f32>) -> vec4<f32> {
  return fma(magic4(q >> 16u), xb, fma(magic4(q & 0xffffu), xa, pk));
}

// The x values of one chunk (16), normalised when NORM. Named values only: arrays in this hot loop end
// up in local memory on some compilers.
struct XChunk { x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>, sx: f32, ss: f32 }

fn xchunk(xb: u32, gb: u32) -> XChunk {
  var c: XChunk;
  c.x0 = x[xb];
  c.x1 = x[xb + 1u];
  c.x2 = x[xb + 2u];
  c.x3 = x[xb + 3u];
#ifdef NORM
  c.ss = dot(c.x0, c.x0) + dot(c.x1, c.x1);
  c.x0 *= gamma[gb];
  c.x1 *= gamma[gb + 1u];
  c.ss = c.ss + dot(c.x2, c.x2) + dot(c.x3, c.x3);
  c.x2 *= gamma[gb + 2u];
  c.x3 *= gamma[gb + 3u];
#endif
  var sv = c.x0 + c.x1;
  sv = sv + (c.x2 + c.x3);
  c.sx = (sv.x + sv.y) + (sv.z + sv.w);
  return c;
}

// Σ q·x̂ of one chunk of one column.
fn cdot(q: wq_t, c: XChunk) -> f32 {
  let pk = wdot(q.y, c.x2, c.x3, wdot(q.x, c.x0, c.x1, vec4<f32>(0.0)));
  return dot(pk, vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625));
}

// One chunk of the team's four columns as loaded: raw weight words and the raw 32-bit words holding each
// column's 16-bit scale and bias. Nothing is converted at load time, so the loads stay in flight until the
// chunk is used an iteration later (converting at once would wait for them right there).
struct Stage { q0: wq_t, q1: wq_t, q2: wq_t, q3: wq_t, sw: vec4<u32>, bw: vec4<u32>, gi: vec4<u32> }

fn stage(c: vec4<u32>, ci: u32, cpr: u32, gpr: u32) -> Stage {
  let gi = c * gpr + vec4<u32>((ci * QV * 8u) / GS);
  let h = gi >> vec4<u32>(1u);
  return Stage(w[c.x * cpr + ci], w[c.y * cpr + ci], w[c.z * cpr + ci], w[c.w * cpr + ci],
               vec4<u32>(scales[h.x], scales[h.y], scales[h.z], scales[h.w]),
               vec4<u32>(biases[h.x], biases[h.y], biases[h.z], biases[h.w]), gi);
}

struct ScaleBias { s: vec4<f32>, b: vec4<f32> }

// Scales and biases of a stage's four columns as f32.
fn stage_sb(s: Stage) -> ScaleBias {
  return ScaleBias(
    vec4<f32>(half_at(s.sw.x, s.gi.x), half_at(s.sw.y, s.gi.y), half_at(s.sw.z, s.gi.z),
              half_at(s.sw.w, s.gi.w)),
    vec4<f32>(half_at(s.bw.x, s.gi.x), half_at(s.bw.y, s.gi.y), half_at(s.bw.z, s.gi.z),
              half_at(s.bw.w, s.gi.w)));
}

struct RowDot { d: vec4<f32>, ss: f32 }

// One row, one chunk, four columns: scale·Σq·x̂ + bias·Σx̂ per column, and Σx² of the raw x (NORM).
fn q4row(xb: u32, gb: u32, q0: wq_t, q1: wq_t, q2: wq_t, q3: wq_t, sc: vec4<f32>, bi: vec4<f32>) -> RowDot {
  let c = xchunk(xb, gb);
  let d = vec4<f32>(cdot(q0, c), cdot(q1, c), cdot(q2, c), cdot(q3, c));
  return RowDot(sc * d + bi * c.sx, c.ss);
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
  let cpr = params.K / (8u * QV);    // chunks per row
  let gpr = params.K / GS;
  let nb = tid * 4u;
#ifdef SWIGLU
  // W = [gate | up] (N = 2I): the team takes gates j, j+1 and their up rows, and writes h[j], h[j+1].
  let I = params.N / 2u;
  let c0 = min(tid * 2u, I - 1u);
  let c1 = c0 + I;
  let c2 = min(tid * 2u + 1u, I - 1u);
  let c3 = c2 + I;
#else
  let c0 = min(nb, params.N - 1u);   // columns clamped in range: computed, never written
  let c1 = min(nb + 1u, params.N - 1u);
  let c2 = min(nb + 2u, params.N - 1u);
  let c3 = min(nb + 3u, params.N - 1u);
#endif
  let team = lid / T;
  for (var m0 = 0u; m0 < params.M; m0 += MB) {
    let r0 = (params.row0 + m0) * K4;
#ifdef FOUR_ROW_BLOCKS
    let r1 = (params.row0 + min(m0 + 1u, params.M - 1u)) * K4;
    let r2 = (params.row0 + min(m0 + 2u, params.M - 1u)) * K4;
    let r3 = (params.row0 + min(m0 + 3u, params.M - 1u)) * K4;
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
#endif
    var a0 = vec4<f32>(0.0);
    var ss = vec4<f32>(0.0);
    let cs = vec4<u32>(c0, c1, c2, c3);
    var cur = stage(cs, min(lane, cpr - 1u), cpr, gpr);
    var nxt = stage(cs, min(lane + T, cpr - 1u), cpr, gpr);
    for (var ci = lane; ci < cpr; ci += T) {
      // Loads two chunks ahead of use.
      let nn = stage(cs, min(ci + 2u * T, cpr - 1u), cpr, gpr);
      let sb = stage_sb(cur);
      let sc = sb.s;
      let bi = sb.b;
      let q0 = cur.q0;
      let q1 = cur.q1;
      let q2 = cur.q2;
      let q3 = cur.q3;
      let xo = ci * 2u * QV;
      // Row by row, the same code whatever MB is: a row's bits never depend on M.
      let d0 = q4row(r0 + xo, xo, q0, q1, q2, q3, sc, bi);
      a0 += d0.d;
      ss.x += d0.ss;
#ifdef FOUR_ROW_BLOCKS
      let d1 = q4row(r1 + xo, xo, q0, q1, q2, q3, sc, bi);
      a1 += d1.d;
      ss.y += d1.ss;
      let d2 = q4row(r2 + xo, xo, q0, q1, q2, q3, sc, bi);
      a2 += d2.d;
      ss.z += d2.ss;
      let d3 = q4row(r3 + xo, xo, q0, q1, q2, q3, sc, bi);
      a3 += d3.d;
      ss.w += d3.ss;
#endif
      cur = nxt;
      nxt = nn;
    }
    // Team sum in a fixed order: shuffles inside each sub-team, then the sub-teams in order.
    let p = (lid / TS) * (MB + 1u);
    let t0 = sub_sum(a0);
#ifdef FOUR_ROW_BLOCKS
    let t1 = sub_sum(a1);
    let t2 = sub_sum(a2);
    let t3 = sub_sum(a3);
#endif
    let tss = sub_sum(ss);
    if (lid % TS == 0u) {
      part[p] = t0;
#ifdef FOUR_ROW_BLOCKS
      part[p + 1u] = t1;
      part[p + 2u] = t2;
      part[p + 3u] = t3;
#endif
      part[p + MB] = tss;
    }
    workgroupBarrier();
#ifdef SWIGLU
    if (lane < 2u && tid * 2u + lane < I) {
      let n = tid * 2u + lane;
      let sst = team_total(team, MB);
      for (var j = 0u; j < MB; j++) {
        if (m0 + j >= params.M) { break; }
        let v = team_total(team, j) * norm_factor(sst[j]);
        y[(params.row0 + m0 + j) * params.ldy + params.n_off + n] = silu(v[2u * lane]) * v[2u * lane + 1u];
      }
    }
#else
    if (lane < 4u && nb + lane < params.N) {
      let n = nb + lane;
      let sst = team_total(team, MB);
      for (var j = 0u; j < MB; j++) {
        if (m0 + j >= params.M) { break; }
        store(params.row0 + m0 + j, n, team_total(team, j)[lane] * norm_factor(sst[j]));
      }
    }
#endif
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let teams = WG / T;
  let team = lid / T;
  let lane = lid % T;
  q4_team(wg_linear(wid, nwg) * teams + team, lane, lid);
}

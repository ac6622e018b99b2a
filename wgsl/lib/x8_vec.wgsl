// Shared by the int8-x vector kernels (matmul_vec_q4x8.wgsl, moe_vec_x8.wgsl): quantizing rows of x into
// workgroup memory, the integer dot of one chunk, the staged chunk. Included after the kernel's x (vec4<f32>),
// gamma (NORM), xq, xs, XW and WG, and after lib/x8.wgsl.

// A quantized word's store: group words by pairs into xq, the group's (sx, Σx) into xs (word wi from slot 0).
fn x8_store(ok: bool, wi: u32, g: X8Group) {
  if (ok) {
    if (wi % 2u == 0u) { xq[wi / 2u] = g.w; }
    if (wi % 4u == 0u) { xs[wi / 4u] = vec2<f32>(g.sx, g.sum); }
  }
}

// Quantizes the row of x starting at vec4 xb into slot j of xq / xs (with NORM x·gamma, returning this lane's
// part of the row's Σx²). Every lane runs the loop the same number of times (shuffles in uniform control
// flow); lanes past the row's words compute on clamped data and drop it. The 4 words of a group sit in 4
// adjacent lanes (WG and the group both multiples of 4).
fn x8_row(j: u32, xb: u32, lid: u32) -> f32 {
  let words = params.K / 8u;
  var ss = 0.0;
  for (var w0 = 0u; w0 < words; w0 += WG) {
    let ok = w0 + lid < words;
    let wi = min(w0 + lid, words - 1u);
    var a = x[xb + 2u * wi];
    var b = x[xb + 2u * wi + 1u];
#ifdef NORM
    if (ok) { ss += dot(a, a) + dot(b, b); }
    a *= gamma[2u * wi];
    b *= gamma[2u * wi + 1u];
#endif
    x8_store(ok, j * (params.K / 8u) + wi, x8_group(a, b));
  }
  return ss;
}

// Σ q_w·q_x of one chunk: 4 weight words against their 8 int8 x words (exact in i32).
fn idot(q: vec4<u32>, xa: vec4<u32>, xb: vec4<u32>) -> i32 {
  let m = 0x0f0f0f0fu;
  return ((dot4I8Packed(q.x & m, xa.x) + dot4I8Packed((q.x >> 4u) & m, xa.y)) +
          (dot4I8Packed(q.y & m, xa.z) + dot4I8Packed((q.y >> 4u) & m, xa.w))) +
         ((dot4I8Packed(q.z & m, xb.x) + dot4I8Packed((q.z >> 4u) & m, xb.y)) +
          (dot4I8Packed(q.w & m, xb.z) + dot4I8Packed((q.w >> 4u) & m, xb.w)));
}

// One chunk of a team's 4 weight rows as loaded: raw weight vec4s and the words holding their 16-bit scale and
// bias; converted only when used, so the loads stay in flight.
struct X8Stage {
  q0: vec4<u32>, q1: vec4<u32>, q2: vec4<u32>, q3: vec4<u32>,
  sw: vec4<u32>, bw: vec4<u32>, gi: vec4<u32>,
}

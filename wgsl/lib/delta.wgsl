// Shared by the gated delta rule kernels: softplus of the decay gate (gated_delta.wgsl and the chunked form)
// and the slot geometry of the chunked form (gated_delta_chunk_*.wgsl, chunk length C).
// Chunks are aligned to absolute positions: a segment whose first row has position p and `len` rows spans
// chunks 0 .. ⌈(p % C + len) / C⌉ − 1, and slot t of chunk c holds segment row c·C + t − p % C when that
// lies in [0, len); other slots are padding (k, q, v, β and g are zero there). A prefill split at a multiple
// of C therefore leaves every chunk, and so every number, as one pass computes it.

// log(1 + e^x) without overflow, and without losing e^x ≪ 1 to the 1 + (no log1p in WGSL).
fn softplus(x: f32) -> f32 {
  let e = exp(-abs(x));
  let l = select(log(1.0 + e), e * (1.0 - e * (0.5 - e / 3.0)), e < 1e-3);
  return max(x, 0.0) + l;
}

// The step row at slot index n = c·C + t of a segment (first row row0, len rows, pos % C = off), or −1 for
// padding.
fn delta_row(row0: u32, len: u32, off: u32, n: u32) -> i32 {
  return select(-1, i32(row0 + n - off), n >= off && n - off < len);
}

// Workgroup sum and max over WG lanes (WG: the kernel's override workgroup size, a power of two).
// Every lane returns the same value. The order of additions depends only on WG and the subgroup size,
// never on the data or on other rows of the batch (batch invariance).
var<workgroup> red_buf: array<f32, WG>;

fn wg_sum(v: f32, lid: u32) -> f32 {
  red_buf[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { red_buf[lid] = red_buf[lid] + red_buf[lid + s]; }
    workgroupBarrier();
  }
  let r = red_buf[0];
  workgroupBarrier();
  return r;
}

fn wg_max(v: f32, lid: u32) -> f32 {
  red_buf[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (lid < s) { red_buf[lid] = max(red_buf[lid], red_buf[lid + s]); }
    workgroupBarrier();
  }
  let r = red_buf[0];
  workgroupBarrier();
  return r;
}

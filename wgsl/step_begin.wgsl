// First dispatch of a decode step: fills each decode row's token and position from its slot, so a step
// encoded ahead of time reads what the previous step's sampler produced (no CPU round trip).
//   rows[r].pos = slots[rows[r].slot].pos;  rows[r].token = hist[slot, pos]     for decode rows (kind 1)
// Bindings:  slots (slots) SlotState;  hist (slots, ctx) u32;  rows (R) read_write
// Grid: ceil(R / WG).
#include "lib/common.wgsl"

override WG: u32 = 64;

struct Params {
  R: u32,    // rows in the step
  ctx: u32,  // hist row length per slot (tokens)
}
struct SlotState { pos: u32, limit: u32, done: u32, _pad: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> slots: array<SlotState>;
@group(0) @binding(2) var<storage, read> hist: array<u32>;
@group(0) @binding(3) var<storage, read_write> rows: array<Row>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let r = gid.x;
  if (r >= params.R || rows[r].kind != 1u) { return; }
  let slot = rows[r].slot;
  let pos = slots[slot].pos;
  rows[r].pos = pos;
  rows[r].token = hist[slot * params.ctx + pos];
}

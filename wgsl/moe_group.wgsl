// Groups a prefill step's (row, expert) pairs by expert for moe_tiled.wgsl, on the GPU (no read-back):
//   pairs p = P0 .. P0 + pairs − 1 (P0 = row0·k), expert ids[p]  →  per expert its count, its first slot
//   in `order` (exclusive sum), its first tile of BM pairs (and the total), and `order` itself.
// Bindings:  ids (rows·k) u32;  groups (3E + 1 + pairs) u32, layout in lib/moe.wgsl (written)
// Grid: 1 workgroup of WG lanes (pairs are few: rows·k): counts by workgroup atomics, a scan over lanes
// (each lane owns ceil(E/WG) consecutive experts), then each pair takes a slot of its expert. Every section
// is rewritten here, so the buffer needs no clearing between dispatches. The order within an expert follows
// the atomics (arbitrary): moe_tiled.wgsl gives each pair the same bits wherever it sits.
#include "lib/common.wgsl"
#include "lib/moe.wgsl"

override WG: u32 = 256;
const MAX_E: u32 = 512u;

struct Params {
  P0: u32,     // first pair (row0·k)
  pairs: u32,  // pairs to group (M·k)
  E: u32,      // experts (≤ MAX_E)
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> groups: array<u32>;

var<workgroup> cnt: array<atomic<u32>, MAX_E>;   // counts, then the scatter cursors
var<workgroup> scan: array<vec2<u32>, WG>;       // per lane: (pairs, tiles) of its experts, then scanned

fn tiles_of(c: u32) -> u32 { return (c + BM - 1u) / BM; }

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
  let E = params.E;
  for (var e = lid; e < E; e += WG) { atomicStore(&cnt[e], 0u); }
  workgroupBarrier();
  // An id past E (never written by moe_route.wgsl) is clamped so no access leaves the buffers.
  for (var i = lid; i < params.pairs; i += WG) { atomicAdd(&cnt[min(ids[params.P0 + i], E - 1u)], 1u); }
  workgroupBarrier();
  let epl = (E + WG - 1u) / WG;
  let ea = min(lid * epl, E);
  let eb = min(ea + epl, E);
  var own = vec2<u32>(0u);
  for (var e = ea; e < eb; e++) {
    let c = atomicLoad(&cnt[e]);
    own += vec2<u32>(c, tiles_of(c));
  }
  scan[lid] = own;
  workgroupBarrier();
  // Inclusive scan over lanes (Hillis–Steele).
  for (var d = 1u; d < WG; d = d << 1u) {
    var v = vec2<u32>(0u);
    if (lid >= d) { v = scan[lid - d]; }
    workgroupBarrier();
    scan[lid] += v;
    workgroupBarrier();
  }
  var run = scan[lid] - own;
  for (var e = ea; e < eb; e++) {
    let c = atomicLoad(&cnt[e]);
    groups[e] = c;
    groups[E + e] = run.x;
    groups[2u * E + e] = run.y;
    atomicStore(&cnt[e], run.x);
    run += vec2<u32>(c, tiles_of(c));
  }
  if (lid == WG - 1u) { groups[3u * E] = scan[WG - 1u].y; }
  workgroupBarrier();
  let ob = 3u * E + 1u;
  for (var i = lid; i < params.pairs; i += WG) {
    let p = params.P0 + i;
    let slot = atomicAdd(&cnt[min(ids[p], E - 1u)], 1u);
    groups[ob + slot] = p;
  }
}

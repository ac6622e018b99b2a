// Grammar advance, after sampling in the same step: each logit row whose slot has an active automaton and
// whose sampler ran this step (slots[slot].pos = row.pos + 1) walks the token it drew,
// hist[slot, row.pos + 1], from the slot's state and stores the end state. An EOS leaves the state (the
// slot is done); so does a walk into DEAD, which the mask rules out.
// Bindings:  lrows (L) u32 step row of each logit row;  rows (R) Row;  slots (slots) SlotState
//            hist (slots, ctx) u32;  gstate (slots) GrammarState, read_write
//            table (slots, max_states·129) u32;  tokens (V + 1 + ⌈bytes / 4⌉) u32;  eos (1 + n) u32
// Grid: ⌈L / WG⌉. One lane per logit row.
#include "lib/common.wgsl"

override WG: u32 = 64;

struct Params {
  L: u32,           // logit rows
  V: u32,           // vocabulary (tokens in the byte table)
  ctx: u32,         // hist row length per slot (tokens)
  max_states: u32,  // states of capacity per slot's table region
}
struct SlotState { pos: u32, limit: u32, done: u32, _pad: u32 }
struct GrammarState { on: u32, state: u32, _pad0: u32, _pad1: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> lrows: array<u32>;
@group(0) @binding(2) var<storage, read> rows: array<Row>;
@group(0) @binding(3) var<storage, read> slots: array<SlotState>;
@group(0) @binding(4) var<storage, read> hist: array<u32>;
@group(0) @binding(5) var<storage, read_write> gstate: array<GrammarState>;
@group(0) @binding(6) var<storage, read> table: array<u32>;
@group(0) @binding(7) var<storage, read> tokens: array<u32>;
@group(0) @binding(8) var<storage, read> eos: array<u32>;
#include "lib/grammar.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let lr = gid.x;
  if (lr >= params.L) { return; }
  let row = rows[lrows[lr]];
  let slot = row.slot;
  let np = row.pos + 1u;
  if (gstate[slot].on == 0u || slots[slot].pos != np) { return; }
  let tok = hist[slot * params.ctx + np];
  if (tok >= params.V || is_eos(tok)) { return; }
  let end = walk_token(slot * params.max_states * TABLE_WORDS, gstate[slot].state, tok, params.V);
  if (end != DEAD) { gstate[slot].state = end; }
}

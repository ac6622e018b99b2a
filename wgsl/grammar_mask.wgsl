// Grammar mask: on each logit row whose slot has an active automaton (and is not done), the logits of the
// tokens that would leave the grammar or overrun the length budget become −3e38, so the sampler draws only
// tokens that keep the output completable within max_tokens.
//   s = the slot's state; left = limit − (row.pos + 1): tokens the sequence may still take after this one.
//   token t < V is allowed iff it has bytes, its bytes walked from s never meet DEAD, and the end state s'
//   has dist[s'] ≤ max(left − 1, dist[s] − 1); an EOS id is allowed iff accept[s].
//   Why output ends accepted and a row is never all masked: dist[s] ≤ left + 1 (true at the first token when
//   dist[0] ≤ max_tokens) stays true, since an allowed token's dist[s'] ≤ max(left − 1, dist[s] − 1) ≤ left;
//   so at left = 0 only tokens into dist 0, or EOS from an accepting s, pass; and EOS (dist[s] = 0) or the
//   single-byte token of a shortest-path byte (dist[s'] = dist[s] − 1) always passes.
// Bindings:  logits (L, V) f32, masked in place;  lrows (L) u32 step row of each logit row;  rows (R) Row
//            slots (slots) SlotState;  gstate (slots) GrammarState;  table (slots, max_states·129) u32
//            tokens (V + 1 + ⌈bytes / 4⌉) u32;  eos (1 + n) u32
// Grid: (⌈V / WG⌉, L). One lane per token.
#include "lib/common.wgsl"

override WG: u32 = 256;
const MASKED: f32 = -3.0e38;

struct Params {
  V: u32,           // vocabulary (logit row length)
  max_states: u32,  // states of capacity per slot's table region
}
struct SlotState { pos: u32, limit: u32, done: u32, _pad: u32 }
struct GrammarState {
  on: u32,      // 1 while the slot's output is constrained
  state: u32,   // current automaton state
  _pad0: u32,
  _pad1: u32,
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<storage, read> lrows: array<u32>;
@group(0) @binding(3) var<storage, read> rows: array<Row>;
@group(0) @binding(4) var<storage, read> slots: array<SlotState>;
@group(0) @binding(5) var<storage, read> gstate: array<GrammarState>;
@group(0) @binding(6) var<storage, read> table: array<u32>;
@group(0) @binding(7) var<storage, read> tokens: array<u32>;
@group(0) @binding(8) var<storage, read> eos: array<u32>;
#include "lib/grammar.wgsl"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x * WG + lid;
  let lr = wid.y;
  if (t >= params.V) { return; }
  let row = rows[lrows[lr]];
  let slot = row.slot;
  let g = gstate[slot];
  if (g.on == 0u || slots[slot].done != 0u) { return; }
  let base = slot * params.max_states * TABLE_WORDS;
  let info = base + params.max_states * NEXT_WORDS;
  let here = table[info + g.state];
  var ok: bool;
  if (is_eos(t)) {
    ok = (here & ACCEPT) != 0u;
  } else {
    let end = walk_token(base, g.state, t, params.V);
    ok = tokens[t + 1u] > tokens[t] && end != DEAD;
    if (ok) {
      let left = i32(slots[slot].limit) - i32(row.pos + 1u);
      let d = i32(table[info + end] & ~ACCEPT);
      ok = d <= max(left - 1, i32(here & ~ACCEPT) - 1);
    }
  }
  if (!ok) { logits[lr * params.V + t] = MASKED; }
}

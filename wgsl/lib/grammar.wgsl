// Walking a token's bytes through a slot's automaton (grammar_mask.wgsl, grammar_advance.wgsl). The
// including kernel declares `table`, `tokens` (layouts in src/ops/grammar.ts) and `eos`.
//   table region of a slot at word `base`: next rows (128 words a state, two u16 entries per word, byte 2w
//   in the low half), then at base + max_states·128 one word per state: dist | accept << 31.
//   tokens: offsets (V + 1), then all bytes packed four per word (little-endian).

const DEAD: u32 = 0xffffu;
const NEXT_WORDS: u32 = 128u;
const TABLE_WORDS: u32 = 129u;  // per state of capacity: its next row and its info word
const ACCEPT: u32 = 0x80000000u;

// The state after token t's bytes from state s, or DEAD once a byte leaves the grammar.
fn walk_token(base: u32, s: u32, t: u32, V: u32) -> u32 {
  var cur = s;
  let b0 = tokens[t];
  let b1 = tokens[t + 1u];
  var word = 0u;
  for (var i = b0; i < b1; i++) {
    if (i == b0 || (i & 3u) == 0u) { word = tokens[V + 1u + (i >> 2u)]; }
    let byte = (word >> ((i & 3u) * 8u)) & 0xffu;
    cur = (table[base + cur * NEXT_WORDS + (byte >> 1u)] >> ((byte & 1u) * 16u)) & 0xffffu;
    if (cur == DEAD) { break; }
  }
  return cur;
}

fn is_eos(t: u32) -> bool {
  let n = eos[0];
  for (var e = 0u; e < n; e++) { if (eos[1u + e] == t) { return true; } }
  return false;
}

/**
 * CPU reference of grammar_mask.wgsl and grammar_advance.wgsl, written from their headers' rules on the
 * automata (ByteDfa) and token bytes (TokenBytes) themselves, not on the GPU packing, so a packing mistake
 * shows as a mismatch. Integer logic: the GPU must match it exactly.
 *   mask, per logit row of an active slot that is not done, with s its state and
 *   left = limit − (row.pos + 1): token t is allowed iff it has bytes, walking them from s never meets
 *   DEAD, and dist[end] ≤ max(left − 1, dist[s] − 1); an EOS id is allowed iff accept[s]; others → MASKED.
 *   advance, per logit row of an active slot whose sampler ran (slot pos = row.pos + 1): the token at
 *   hist[slot, row.pos + 1], unless EOS or a walk into DEAD, moves the state to its walk's end.
 * Also the helpers tests build automata with: `makeDfa` and `randomDfa` (dist from the compiler's BFS).
 * @module
 */
import { type ByteDfa, DEAD } from "../../grammar/dfa.ts";
import { distances } from "../../grammar/minimize.ts";
import type { TokenBytes } from "../../grammar/token_bytes.ts";
import type { Rng } from "../rng.ts";
import type { Row } from "./paged.ts";
import type { SlotState } from "./sample.ts";

/** `distances`' mark of a state that cannot reach acceptance. */
const UNREACHABLE = 0xffffffff;

/** The value a masked logit takes (the f32 of −3e38). */
export const MASKED = Math.fround(-3.0e38);

export interface GrammarSlotState {
  /** 1 while the slot is constrained (the kernels' `on`). */
  active: number;
  state: number;
}

/** The state after token `t`'s bytes from `s`, or DEAD. */
export function walk(dfa: ByteDfa, tb: TokenBytes, s: number, t: number): number {
  let cur = s;
  for (let i = tb.offsets[t]; i < tb.offsets[t + 1] && cur !== DEAD; i++) {
    cur = dfa.next[cur * 256 + tb.bytes[i]];
  }
  return cur;
}

/** Whether the mask lets token `t` through from state `s` with `left` tokens to go after it. */
export function allowed(
  dfa: ByteDfa,
  tb: TokenBytes,
  eos: number[],
  s: number,
  left: number,
  t: number,
): boolean {
  if (eos.includes(t)) return !!dfa.accept[s];
  if (tb.offsets[t + 1] === tb.offsets[t]) return false;
  const end = walk(dfa, tb, s, t);
  return end !== DEAD && dfa.dist[end] <= Math.max(left - 1, dfa.dist[s] - 1);
}

export interface GrammarRefInputs {
  V: number;
  ctx: number;
  /** (L, V) logits. */
  logits: Float64Array;
  lrows: number[];
  rows: Row[];
  slots: SlotState[];
  gstate: GrammarSlotState[];
  /** Each slot's automaton (its table region). */
  dfas: ByteDfa[];
  tb: TokenBytes;
  eos: number[];
  /** (slots, ctx) token history (advance reads the sampled ids there). */
  hist: Uint32Array;
}

/** The logits after the mask. */
export function maskRef(i: GrammarRefInputs): Float64Array {
  const out = Float64Array.from(i.logits);
  i.lrows.forEach((r, l) => {
    const row = i.rows[r];
    const g = i.gstate[row.slot];
    const st = i.slots[row.slot];
    if (!g.active || st.done) return;
    const left = st.limit - (row.pos + 1);
    for (let t = 0; t < i.V; t++) {
      if (!allowed(i.dfas[row.slot], i.tb, i.eos, g.state, left, t)) out[l * i.V + t] = MASKED;
    }
  });
  return out;
}

/** The per-slot grammar state after the advance. */
export function advanceRef(i: GrammarRefInputs): GrammarSlotState[] {
  const out = i.gstate.map((g) => ({ ...g }));
  for (const r of i.lrows) {
    const row = i.rows[r];
    const g = out[row.slot];
    if (!g.active || i.slots[row.slot].pos !== row.pos + 1) continue;
    const tok = i.hist[row.slot * i.ctx + row.pos + 1];
    if (tok >= i.V || i.eos.includes(tok)) continue;
    const end = walk(i.dfas[row.slot], i.tb, g.state, tok);
    if (end !== DEAD) g.state = end;
  }
  return out;
}

/** A ByteDfa from its transitions and accepting states (dist filled in); every state must be live. */
export function makeDfa(states: number, next: Uint16Array, accept: Uint8Array): ByteDfa {
  const dist = distances(next, accept, states, 256);
  const dead = dist.findIndex((x) => x === UNREACHABLE);
  if (dead >= 0) throw new Error(`state ${dead} cannot reach an accepting state`);
  return { states, next, dist, accept };
}

/**
 * A random automaton over `alphabet`: each state has a transition on each alphabet byte with probability
 * `density`, about one state in seven accepts, and states that cannot reach acceptance get an extra
 * transition into ones that can until every state is live.
 */
export function randomDfa(rng: Rng, states: number, alphabet: number[], density: number): ByteDfa {
  const next = new Uint16Array(states * 256).fill(DEAD);
  const accept = new Uint8Array(states);
  for (let s = 0; s < states; s++) {
    accept[s] = rng.next() < 0.15 ? 1 : 0;
    for (const b of alphabet) if (rng.next() < density) next[s * 256 + b] = rng.int(0, states);
  }
  accept[states - 1] = 1;
  for (;;) {
    const d = [...distances(next, accept, states, 256)];
    const live = d.flatMap((x, s) => (x === UNREACHABLE ? [] : [s]));
    if (live.length === states) return makeDfa(states, next, accept);
    for (let s = 0; s < states; s++) {
      if (d[s] === UNREACHABLE) {
        next[s * 256 + alphabet[rng.int(0, alphabet.length)]] = live[rng.int(0, live.length)];
      }
    }
  }
}

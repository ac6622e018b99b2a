/**
 * Host wrappers of `grammar_mask.wgsl` (mask the logits a slot's automaton forbids) and
 * `grammar_advance.wgsl` (move the automaton by the sampled token), and the GPU layout of their tables:
 *   tokens (V + 1 + ⌈bytes / 4⌉) u32: byte offsets of each token (V + 1), then every token's bytes packed
 *          four per word, little-endian;
 *   state  (slots) GrammarState {on, state, _, _};
 *   table  (slots, maxStates · 129) u32: per slot, next[s] as 128 words (two u16 entries each, byte 2w in
 *          the low half) for every state, then one word per state: dist | accept << 31.
 * @module
 */
import type { ByteDfa } from "../grammar/dfa.ts";
import type { TokenBytes } from "../grammar/token_bytes.ts";
import { check, type OpContext, record } from "./context.ts";
import type { SlotBuffers } from "./sample.ts";

/** u32 words of one state's `next` row (256 u16 entries). */
export const NEXT_WORDS = 128;
/** u32 words a slot's table region takes per state of capacity: its next row and its dist/accept word. */
export const TABLE_WORDS_PER_STATE = NEXT_WORDS + 1;
/** The accept flag in a state's info word; the low bits hold dist. */
export const ACCEPT_BIT = 0x80000000;

/** Grammar state on the GPU, per slot, as the kernels bind it. */
export interface GrammarBuffers {
  /** Token byte table (layout above) of V tokens. */
  tokens: GPUBuffer;
  /** (slots) GrammarState, 16 bytes each. */
  state: GPUBuffer;
  /** (slots, maxStates · TABLE_WORDS_PER_STATE) u32. */
  table: GPUBuffer;
  V: number;
  maxStates: number;
}

/** The token byte table as u32 words (layout above). */
export function packTokenBytes(tb: TokenBytes): Uint32Array {
  const V = tb.vocab;
  const out = new Uint32Array(V + 1 + Math.ceil(tb.bytes.length / 4));
  out.set(tb.offsets, 0);
  new Uint8Array(out.buffer, (V + 1) * 4, tb.bytes.length).set(tb.bytes);
  return out;
}

/** Per state: dist | accept << 31. */
export function packInfo(dfa: ByteDfa): Uint32Array {
  const out = new Uint32Array(dfa.states);
  for (let s = 0; s < dfa.states; s++) out[s] = (dfa.dist[s] | (dfa.accept[s] ? ACCEPT_BIT : 0)) >>> 0;
  return out;
}

/**
 * A slot's whole table region (maxStates · TABLE_WORDS_PER_STATE words), for uploads that write all of
 * it at once; unused states are DEAD everywhere. `next` as u16 pairs is already the packed layout
 * (little-endian), so it is copied as is.
 */
export function packTable(dfa: ByteDfa, maxStates: number): Uint32Array {
  const out = new Uint32Array(maxStates * TABLE_WORDS_PER_STATE).fill(0xffffffff, 0, maxStates * NEXT_WORDS);
  new Uint16Array(out.buffer, 0, dfa.states * 256).set(dfa.next);
  out.set(packInfo(dfa), maxStates * NEXT_WORDS);
  return out;
}

/** Logits of tokens the slot's automaton forbids at this position become −3e38 (rows of active slots). */
export async function grammarMask(
  ctx: OpContext,
  a: {
    logits: GPUBuffer;
    lrows: GPUBuffer;
    rows: GPUBuffer;
    L: number;
    V: number;
    s: SlotBuffers;
    g: GrammarBuffers;
  },
): Promise<void> {
  check(a.V === a.g.V, "grammarMask", `logit rows of ${a.V} tokens, token table of ${a.g.V}`);
  await record(ctx, { file: "grammar_mask.wgsl", overrides: { WG: 256 } }, {
    buffers: {
      logits: a.logits,
      lrows: a.lrows,
      rows: a.rows,
      slots: a.s.slots,
      gstate: a.g.state,
      table: a.g.table,
      tokens: a.g.tokens,
      eos: a.s.eos,
    },
    params: { V: a.V, max_states: a.g.maxStates },
    grid: [Math.ceil(a.V / 256), a.L, 1],
  });
}

/** After sampling: each active slot whose sampler ran moves its automaton by the token it drew. */
export async function grammarAdvance(
  ctx: OpContext,
  a: { lrows: GPUBuffer; rows: GPUBuffer; L: number; s: SlotBuffers; g: GrammarBuffers },
): Promise<void> {
  await record(ctx, { file: "grammar_advance.wgsl", overrides: { WG: 64 } }, {
    buffers: {
      lrows: a.lrows,
      rows: a.rows,
      slots: a.s.slots,
      hist: a.s.hist,
      gstate: a.g.state,
      table: a.g.table,
      tokens: a.g.tokens,
      eos: a.s.eos,
    },
    params: { L: a.L, V: a.g.V, ctx: a.s.ctx, max_states: a.g.maxStates },
    grid: [Math.ceil(a.L / 64), 1, 1],
  });
}

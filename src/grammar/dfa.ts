/**
 * The automaton a constrained generation runs on: deterministic, over bytes, every state live (it can
 * still reach an accepting state). Compiled on the CPU (compile.ts) from a JSON schema (schema.ts) or a
 * forced tool call (tool_call.ts), minimal, with the start renumbered to 0; the GPU walks each candidate
 * token's bytes through it to mask the logits, then advances it by the sampled token
 * (wgsl/grammar_mask.wgsl, wgsl/grammar_advance.wgsl). An accepting state may still have transitions
 * (a number can go on with more digits), so the end of the output is a choice there, not forced.
 * @module
 */

/** `next` entry of a byte that leads nowhere. */
export const DEAD = 0xffff;

export interface ByteDfa {
  /** Number of states (at most DEAD); state 0 is the start. */
  states: number;
  /** next[s * 256 + b]: the state after byte b in state s, or DEAD. */
  next: Uint16Array;
  /** Per state: the fewest bytes that reach an accepting state (0 when accepting). */
  dist: Uint32Array;
  /** Per state: 1 when the output may end here. */
  accept: Uint8Array;
}

/**
 * Per-slot grammar state on the GPU for constrained decoding (forced tool calls, JSON output) inside the
 * CPU-free decode loop: the token byte table (made once at load from the tokenizer), each slot's automaton
 * tables in a fixed-capacity region, and each slot's {on, state}. The step's mask and advance kernels
 * (src/ops/grammar.ts) read and move them on the GPU, so no token needs a round trip to the CPU.
 * @module
 */
import { ValidationError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import { type ByteDfa, DEAD } from "../grammar/dfa.ts";
import { singleByteTokens, type TokenBytes } from "../grammar/token_bytes.ts";
import {
  type GrammarBuffers,
  NEXT_WORDS,
  packInfo,
  packTokenBytes,
  TABLE_WORDS_PER_STATE,
} from "../ops/grammar.ts";

/** Default automaton capacity per slot: 4096 states, 516 bytes each. */
export const DEFAULT_GRAMMAR_STATES = 4096;

export class GrammarSlots implements GrammarBuffers {
  readonly tokens: GPUBuffer;
  readonly state: GPUBuffer;
  readonly table: GPUBuffer;
  readonly V: number;
  /** Automaton states a slot's table region holds. */
  readonly maxStates: number;
  /** For each byte value, a token of exactly that byte (−1: none); the mask's liveness relies on them. */
  readonly singleByte: Int32Array;
  #on: boolean[];

  /**
   * `maxStates` is lowered where one table buffer would pass the device's storage-binding limit.
   * Buffers are booked under "activations", like the slot state they sit beside.
   */
  constructor(
    readonly gpu: Gpu,
    readonly count: number,
    tb: TokenBytes,
    maxStates: number,
    eosIds: number[],
  ) {
    const perSlot = TABLE_WORDS_PER_STATE * 4;
    this.maxStates = Math.max(
      1,
      Math.min(maxStates, Math.floor(gpu.info.maxBinding / (count * perSlot)), DEAD),
    );
    const mk = (label: string, size: number) =>
      gpu.memory.create("activations", {
        label,
        size: Math.max(16, Math.ceil(size / 16) * 16),
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
      });
    const words = packTokenBytes(tb);
    this.V = tb.vocab;
    this.tokens = mk("grammar_tokens", words.byteLength);
    gpu.device.queue.writeBuffer(this.tokens, 0, words);
    this.state = mk("grammar_state", count * 16);
    gpu.device.queue.writeBuffer(this.state, 0, new Uint32Array(count * 4));
    this.table = mk("grammar_table", count * this.maxStates * perSlot);
    // The mask judges EOS ids by their own rule, so one of a single byte cannot stand for that byte.
    this.singleByte = singleByteTokens(tb, eosIds);
    this.#on = new Array(count).fill(false);
  }

  /**
   * Throws ValidationError unless `dfa` fits a slot and the mask can always let a token through: tables
   * of the stated sizes, transitions to real states, `dist` the true fewest bytes to acceptance (so every
   * state is live), and from every non-accepting state a shortest-path byte that some token is exactly.
   */
  validate(dfa: ByteDfa): void {
    const n = dfa.states;
    const bad = (what: string) => new ValidationError(`grammar automaton: ${what}`, "grammar");
    if (!Number.isInteger(n) || n < 1) throw bad(`${n} states`);
    if (n > this.maxStates) {
      throw bad(`${n} states; a sequence can hold at most ${this.maxStates} (engine option grammarStates)`);
    }
    if (dfa.next.length !== n * 256 || dfa.dist.length !== n || dfa.accept.length !== n) {
      throw bad(
        `tables of ${dfa.next.length} / ${dfa.dist.length} / ${dfa.accept.length} entries for ${n} states`,
      );
    }
    for (let s = 0; s < n; s++) {
      if ((dfa.dist[s] === 0) !== !!dfa.accept[s]) {
        throw bad(`state ${s}: dist ${dfa.dist[s]}, accept ${dfa.accept[s]}`);
      }
      let best = Infinity;
      let covered = !!dfa.accept[s];
      for (let b = 0; b < 256; b++) {
        const t = dfa.next[s * 256 + b];
        if (t === DEAD) continue;
        if (t >= n) throw bad(`state ${s}, byte ${b}: next state ${t} of ${n}`);
        best = Math.min(best, dfa.dist[t] + 1);
        if (dfa.dist[t] + 1 === dfa.dist[s] && this.singleByte[b] >= 0) covered = true;
      }
      // A consistent dist is the true one, and finite only where acceptance is reachable.
      if (!dfa.accept[s] && best !== dfa.dist[s]) {
        throw bad(`state ${s}: dist ${dfa.dist[s]}, but its transitions give ${best} (dead or inconsistent)`);
      }
      if (!covered) throw bad(`state ${s}: no shortest-path byte from it is a whole token of this tokenizer`);
    }
  }

  /** Starts `slot` on `dfa` at state 0 (queue-ordered writes, like Slots.start). Call `validate` first. */
  start(slot: number, dfa: ByteDfa): void {
    const q = this.gpu.device.queue;
    const base = slot * this.maxStates * TABLE_WORDS_PER_STATE * 4;
    // next as u16 pairs is the packed layout already (little-endian).
    q.writeBuffer(this.table, base, dfa.next, 0, dfa.states * 256);
    q.writeBuffer(this.table, base + this.maxStates * NEXT_WORDS * 4, packInfo(dfa));
    q.writeBuffer(this.state, slot * 16, new Uint32Array([1, 0, 0, 0]));
    this.#on[slot] = true;
  }

  /** Leaves `slot` unconstrained (a write only when it was constrained). */
  clear(slot: number): void {
    if (!this.#on[slot]) return;
    this.gpu.device.queue.writeBuffer(this.state, slot * 16, new Uint32Array(4));
    this.#on[slot] = false;
  }
}

/**
 * Running a ByteDfa on the CPU: for tests, and for the server to check or replay constrained output.
 * @module
 */
import { type ByteDfa, DEAD } from "./dfa.ts";

const utf8 = new TextEncoder();

/** The state after `bytes` from `state` (default the start), or DEAD once a byte leads nowhere. */
export function walk(dfa: ByteDfa, bytes: ArrayLike<number>, state = 0): number {
  let s = state;
  for (let i = 0; i < bytes.length && s !== DEAD; i++) s = dfa.next[s * 256 + bytes[i]];
  return s;
}

/** Whether the whole of `text` (a string is taken as UTF-8) is in the automaton's language. */
export function accepts(dfa: ByteDfa, text: string | ArrayLike<number>): boolean {
  const s = walk(dfa, typeof text === "string" ? utf8.encode(text) : text);
  return s !== DEAD && dfa.accept[s] === 1;
}

/**
 * Test helpers for byte automata: a seeded RNG, the ByteDfa invariants checked from scratch, a minimality
 * check by Moore refinement, and random walks that always end.
 */
import { type ByteDfa, DEAD } from "../../src/grammar/dfa.ts";

/** mulberry32: small, seeded, good enough for picking test cases. */
export class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  next(): number {
    let t = (this.#s = (this.#s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** 0 .. n − 1. */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** lo .. hi inclusive. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  shuffle<T>(xs: readonly T[]): T[] {
    const a = [...xs];
    for (let i = a.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [a[i], a[j]] = [a[j], a[i]];
    }
    return a;
  }
}

/** Everything wrong with `dfa` as a ByteDfa (empty when it is sound), recomputed without the compiler. */
export function dfaProblems(dfa: ByteDfa): string[] {
  const n = dfa.states;
  const out: string[] = [];
  if (n < 1 || n >= DEAD) out.push(`state count ${n}`);
  if (dfa.next.length !== n * 256 || dfa.dist.length !== n || dfa.accept.length !== n) {
    out.push("array sizes");
  }
  const preds: number[][] = Array.from({ length: n }, () => []);
  for (let s = 0; s < n; s++) {
    for (let b = 0; b < 256; b++) {
      const t = dfa.next[s * 256 + b];
      if (t === DEAD) continue;
      if (t >= n) out.push(`next[${s}, ${b}] = ${t} is neither a state nor DEAD`);
      else preds[t].push(s);
    }
  }
  // Fresh BFS from the accepting states over reversed edges.
  const dist = new Array<number>(n).fill(Infinity);
  let frontier: number[] = [];
  for (let s = 0; s < n; s++) if (dfa.accept[s]) (dist[s] = 0, frontier.push(s));
  for (let d = 1; frontier.length; d++) {
    const nextFrontier: number[] = [];
    for (const t of frontier) {
      for (const s of preds[t]) if (dist[s] === Infinity) (dist[s] = d, nextFrontier.push(s));
    }
    frontier = nextFrontier;
  }
  for (let s = 0; s < n; s++) {
    if (dist[s] === Infinity) out.push(`state ${s} cannot reach acceptance`);
    else if (dfa.dist[s] !== dist[s]) out.push(`dist[${s}] = ${dfa.dist[s]}, BFS says ${dist[s]}`);
    if ((dfa.accept[s] === 1) !== (dfa.dist[s] === 0)) {
      out.push(`state ${s}: accept ${dfa.accept[s]}, dist ${dfa.dist[s]}`);
    }
    if (dfa.accept[s] > 1) out.push(`accept[${s}] = ${dfa.accept[s]}`);
  }
  // Start 0 reaches every state (the renumbering is from the start).
  const seen = new Uint8Array(n);
  const stack = [0];
  seen[0] = 1;
  while (stack.length) {
    const s = stack.pop()!;
    for (let b = 0; b < 256; b++) {
      const t = dfa.next[s * 256 + b];
      if (t < n && !seen[t]) (seen[t] = 1, stack.push(t));
    }
  }
  const unreached = seen.reduce((k, x) => k + (x ? 0 : 1), 0);
  if (unreached) out.push(`${unreached} states unreachable from 0`);
  return out.slice(0, 10);
}

/** Number of equivalence classes of states (Moore refinement); equal to `states` when the DFA is minimal. */
export function mooreClasses(dfa: ByteDfa): number {
  const n = dfa.states;
  let cls = Array.from(dfa.accept, (a) => a);
  let count = new Set(cls).size;
  for (;;) {
    const ids = new Map<string, number>();
    const next = cls.map((c, s) => {
      let sig = `${c}`;
      for (let b = 0; b < 256; b++) {
        const t = dfa.next[s * 256 + b];
        sig += `,${t === DEAD ? -1 : cls[t]}`;
      }
      let id = ids.get(sig);
      if (id === undefined) ids.set(sig, id = ids.size);
      return id;
    });
    if (ids.size === count || n === 0) return ids.size;
    cls = next;
    count = ids.size;
  }
}

/**
 * A random path from the start to an accepting state. Half the steps pick a next state uniformly (so a
 * closing quote is as likely as one of 200 string bytes), half a byte; past `soft` bytes only bytes that
 * bring acceptance closer are taken, so every walk ends.
 */
export function randomWalk(dfa: ByteDfa, rng: Rng, soft = 60, stop = 0.3): Uint8Array {
  const out: number[] = [];
  let s = 0;
  for (;;) {
    const long = out.length >= soft;
    const byState = new Map<number, number[]>();
    for (let b = 0; b < 256; b++) {
      const t = dfa.next[s * 256 + b];
      if (t === DEAD || (long && dfa.dist[t] >= dfa.dist[s])) continue;
      const bs = byState.get(t);
      if (bs) bs.push(b);
      else byState.set(t, [b]);
    }
    if (dfa.accept[s] && (byState.size === 0 || rng.chance(stop))) return Uint8Array.from(out);
    if (byState.size === 0) throw new Error(`walk stuck in state ${s} after ${out.length} bytes`);
    let b: number;
    if (rng.chance(0.5)) b = rng.pick(rng.pick([...byState.values()]));
    else b = rng.pick([...byState.values()].flat());
    out.push(b);
    s = dfa.next[s * 256 + b];
  }
}

const fatal = new TextDecoder("utf-8", { fatal: true });
/** Bytes as text; throws on invalid UTF-8. */
export const decodeStrict = (bytes: Uint8Array): string => fatal.decode(bytes);

/**
 * Thompson construction: a regex AST (regex.ts) to an NFA with ε edges, plus the byte classes that the
 * later passes run over instead of 256 bytes. The NFA is built backwards, each node from the state it
 * continues to, and a (node, continuation) pair built once is reused: shared nodes cost nothing twice.
 * @module
 */
import type { Node } from "./regex.ts";

/** An NFA whose states each have at most one byte edge (to a byte set) and any number of ε edges. */
export interface Nfa {
  states: number;
  start: number;
  /** The one accepting state; it has no edges. */
  final: number;
  /** Per state: the id of its byte edge's set, or -1 for none. */
  edgeSet: Int32Array;
  /** Per state: where its byte edge leads. */
  edgeTo: Int32Array;
  /** ε edges in CSR form: those of state s are eps[epsStart[s] .. epsStart[s + 1]). */
  epsStart: Int32Array;
  eps: Int32Array;
  /** Byte classes: bytes that every set either holds together or lacks together share a class. */
  classes: number;
  classOf: Uint8Array;
  /** Per byte set: the classes it is made of. */
  setClasses: Int32Array[];
}

/** Thrown past `maxStates` NFA states; compile.ts turns it into the user-facing error. */
export class TooManyStates extends Error {
  constructor(readonly stage: string, readonly limit: number) {
    super(`${stage} passed ${limit} states`);
  }
}

class Builder {
  edgeSet: number[] = [];
  edgeTo: number[] = [];
  eps: (number[] | null)[] = [];
  sets: Uint8Array[] = [];
  #setIds = new Map<string, number>();
  #memo = new Map<Node, Map<number, number>>();

  constructor(readonly maxStates: number) {}

  state(set = -1, to = -1): number {
    const s = this.edgeSet.length;
    if (s >= this.maxStates) throw new TooManyStates("the NFA", this.maxStates);
    this.edgeSet.push(set);
    this.edgeTo.push(to);
    this.eps.push(null);
    return s;
  }

  epsState(...to: number[]): number {
    const s = this.state();
    this.eps[s] = to;
    return s;
  }

  setId(ranges: readonly (readonly [number, number])[]): number {
    const key = ranges.map(([lo, hi]) => `${lo}-${hi}`).join(",");
    let id = this.#setIds.get(key);
    if (id === undefined) {
      const m = new Uint8Array(256);
      for (const [lo, hi] of ranges) m.fill(1, lo, hi + 1);
      id = this.sets.push(m) - 1;
      this.#setIds.set(key, id);
    }
    return id;
  }

  /** The entry state of `node` followed by whatever `next` accepts. */
  build(node: Node, next: number): number {
    let byNext = this.#memo.get(node);
    const hit = byNext?.get(next);
    if (hit !== undefined) return hit;
    let s: number;
    switch (node.kind) {
      case "bytes":
        s = next;
        for (let i = node.bytes.length - 1; i >= 0; i--) {
          s = this.state(this.setId([[node.bytes[i], node.bytes[i]]]), s);
        }
        break;
      case "class":
        s = this.state(this.setId(node.ranges), next);
        break;
      case "seq":
        s = next;
        for (let i = node.items.length - 1; i >= 0; i--) s = this.build(node.items[i], s);
        break;
      case "alt": {
        // No items: a state without edges, which matches nothing.
        const entries = node.items.map((it) => this.build(it, next));
        s = entries.length === 1 ? entries[0] : this.epsState(...entries);
        break;
      }
      case "repeat":
        s = this.#repeat(node.item, node.min, node.max, node.sep, next);
        break;
    }
    if (!byNext) this.#memo.set(node, byNext = new Map());
    byNext.set(next, s);
    return s;
  }

  #repeat(item: Node, min: number, max: number, sep: Node | null, next: number): number {
    const then = (entry: number) => sep ? this.build(sep, entry) : entry;
    // `after`: the state once k items are written; built from the last item back to the first.
    let after: number;
    let k: number;
    if (max === Infinity) {
      // Past max(min, 1) items, one loop: a single copy of the item however many follow.
      k = Math.max(min, 1);
      after = this.epsState();
      const again = then(this.build(item, after));
      this.eps[after] = [again, next];
    } else {
      k = max;
      after = next;
    }
    for (; k >= 1; k--) {
      const entry = this.build(item, after);
      if (k === 1) return min === 0 ? this.epsState(entry, next) : entry;
      after = k - 1 >= min ? this.epsState(then(entry), next) : then(entry);
    }
    return next;
  }
}

/** Builds the NFA of `node`; throws TooManyStates past `maxStates` states. */
export function buildNfa(node: Node, maxStates: number): Nfa {
  const b = new Builder(maxStates);
  const final = b.state();
  const start = b.build(node, final);
  const n = b.edgeSet.length;
  const epsStart = new Int32Array(n + 1);
  for (let s = 0; s < n; s++) epsStart[s + 1] = epsStart[s] + (b.eps[s]?.length ?? 0);
  const eps = new Int32Array(epsStart[n]);
  for (let s = 0; s < n; s++) eps.set(b.eps[s] ?? [], epsStart[s]);
  const { classes, classOf, setClasses } = byteClasses(b.sets);
  return {
    states: n,
    start,
    final,
    edgeSet: Int32Array.from(b.edgeSet),
    edgeTo: Int32Array.from(b.edgeTo),
    epsStart,
    eps,
    classes,
    classOf,
    setClasses,
  };
}

/** The coarsest partition of the bytes that every set is a union of; bytes in no set share one class. */
function byteClasses(sets: Uint8Array[]): { classes: number; classOf: Uint8Array; setClasses: Int32Array[] } {
  const sig: string[] = new Array(256).fill("");
  for (let k = 0; k < sets.length; k++) {
    const m = sets[k];
    for (let b = 0; b < 256; b++) if (m[b]) sig[b] += `${k},`;
  }
  const ids = new Map<string, number>();
  const classOf = new Uint8Array(256);
  for (let b = 0; b < 256; b++) {
    let c = ids.get(sig[b]);
    if (c === undefined) ids.set(sig[b], c = ids.size);
    classOf[b] = c;
  }
  const setClasses = sets.map((m) => {
    const cs = new Set<number>();
    for (let b = 0; b < 256; b++) if (m[b]) cs.add(classOf[b]);
    return Int32Array.from([...cs].sort((x, y) => x - y));
  });
  return { classes: ids.size, classOf, setClasses };
}

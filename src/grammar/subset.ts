/**
 * Subset construction: an NFA (nfa.ts) to a DFA over byte classes. A DFA state is the set of NFA states
 * with a byte edge (plus the final state) that the input so far can be in; only states reachable from the
 * start are made. Work is capped: past `maxStates` DFA states it throws instead of running on.
 * @module
 */
import { type Nfa, TooManyStates } from "./nfa.ts";

/** A DFA over byte classes, possibly with states that cannot reach acceptance. State 0 is the start. */
export interface ClassDfa {
  states: number;
  classes: number;
  classOf: Uint8Array;
  /** trans[s * classes + c]: the state after class c in state s, or -1. */
  trans: Int32Array;
  accept: Uint8Array;
}

/** Determinizes `nfa`; throws TooManyStates past `maxStates` states. */
export function determinize(nfa: Nfa, maxStates: number): ClassDfa {
  const { classes, edgeSet, edgeTo, epsStart, eps, final, setClasses } = nfa;
  const stamp = new Int32Array(nfa.states);
  let epoch = 0;
  const stack: number[] = [];
  // Huge NFA state sets could take long even under the state cap: bound the closure work as well.
  let work = 0;
  const maxWork = maxStates * 1024;

  /** The states with a byte edge, or final, that ε edges reach from `seeds`; sorted. */
  const closure = (seeds: readonly number[]): number[] => {
    epoch++;
    const out: number[] = [];
    for (const s of seeds) stack.push(s);
    while (stack.length) {
      const s = stack.pop()!;
      if (stamp[s] === epoch) continue;
      stamp[s] = epoch;
      if (++work > maxWork) throw new TooManyStates("the unminimized DFA", maxStates);
      if (edgeSet[s] >= 0 || s === final) out.push(s);
      for (let i = epsStart[s]; i < epsStart[s + 1]; i++) if (stamp[eps[i]] !== epoch) stack.push(eps[i]);
    }
    return out.sort((a, b) => a - b);
  };

  const sets: number[][] = [];
  const ids = new Map<string, number>();
  let trans = new Int32Array(64 * classes).fill(-1);
  const add = (set: number[], key: string): number => {
    const id = sets.length;
    if (id >= maxStates) throw new TooManyStates("the unminimized DFA", maxStates);
    sets.push(set);
    ids.set(key, id);
    if ((id + 1) * classes > trans.length) {
      const grown = new Int32Array(trans.length * 2).fill(-1);
      grown.set(trans);
      trans = grown;
    }
    return id;
  };
  const first = closure([nfa.start]);
  add(first, first.join(","));

  const buckets: number[][] = Array.from({ length: classes }, () => []);
  const touched: number[] = [];
  for (let d = 0; d < sets.length; d++) {
    for (const s of sets[d]) {
      const k = edgeSet[s];
      if (k < 0) continue;
      for (const c of setClasses[k]) {
        if (buckets[c].length === 0) touched.push(c);
        buckets[c].push(edgeTo[s]);
      }
    }
    // Many classes move to the same states (all the plain bytes of a string): close each target list once.
    const local = new Map<string, number>();
    for (const c of touched) {
      const targets = buckets[c];
      const tkey = targets.join(",");
      let t = local.get(tkey);
      if (t === undefined) {
        const set = closure(targets);
        const key = set.join(",");
        t = ids.get(key) ?? add(set, key);
        local.set(tkey, t);
      }
      trans[d * classes + c] = t;
      targets.length = 0;
    }
    touched.length = 0;
  }

  const accept = new Uint8Array(sets.length);
  for (let d = 0; d < sets.length; d++) accept[d] = sets[d].includes(final) ? 1 : 0;
  return {
    states: sets.length,
    classes,
    classOf: nfa.classOf,
    trans: trans.slice(0, sets.length * classes),
    accept,
  };
}

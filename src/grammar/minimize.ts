/**
 * From the subset construction's DFA (subset.ts) to the final ByteDfa: drop the states that cannot reach
 * acceptance, merge equivalent states (Hopcroft's partition refinement), renumber breadth-first from the
 * start so it is state 0, compute `dist`, and expand byte classes to the 256-entry rows.
 * @module
 */
import { type ByteDfa, DEAD } from "./dfa.ts";
import type { ClassDfa } from "./subset.ts";

const INF = 0xffffffff;

/** The fewest bytes from each state to an accepting one (INF when none), by BFS over reversed edges. */
export function distances(
  next: ArrayLike<number>,
  accept: ArrayLike<number>,
  states: number,
  width: number,
): Uint32Array {
  const count = new Int32Array(states + 1);
  for (let i = 0; i < states * width; i++) if (next[i] >= 0 && next[i] < states) count[next[i] + 1]++;
  for (let s = 0; s < states; s++) count[s + 1] += count[s];
  const from = new Int32Array(count[states]);
  const fill = count.slice(0, states);
  for (let i = 0; i < states * width; i++) {
    const t = next[i];
    if (t >= 0 && t < states) from[fill[t]++] = Math.floor(i / width);
  }
  const dist = new Uint32Array(states).fill(INF);
  const queue = new Int32Array(states);
  let tail = 0;
  for (let s = 0; s < states; s++) if (accept[s]) dist[queue[tail++] = s] = 0;
  for (let head = 0; head < tail; head++) {
    const t = queue[head];
    for (let i = count[t]; i < count[t + 1]; i++) {
      const s = from[i];
      if (dist[s] === INF) dist[queue[tail++] = s] = dist[t] + 1;
    }
  }
  return dist;
}

/**
 * Trims, minimizes and expands `dfa`. Returns null when the start state cannot reach acceptance (the
 * language is empty), and the state count when the minimal DFA has more than `maxStates` states.
 */
export function minimize(dfa: ClassDfa, maxStates: number): ByteDfa | null | number {
  const { classes: C, trans } = dfa;
  const live = distances(trans, dfa.accept, dfa.states, C);
  if (live[0] === INF) return null;

  // Live states only (renumbered 0..n-1); an edge into a dead state becomes a missing one (-1).
  const index = new Int32Array(dfa.states).fill(-1);
  let n = 0;
  for (let s = 0; s < dfa.states; s++) if (live[s] !== INF) index[s] = n++;
  const delta = new Int32Array(n * C).fill(-1);
  const accept = new Uint8Array(n);
  for (let s = 0; s < dfa.states; s++) {
    const i = index[s];
    if (i < 0) continue;
    accept[i] = dfa.accept[s];
    for (let c = 0; c < C; c++) {
      const t = trans[s * C + c];
      if (t >= 0) delta[i * C + c] = index[t];
    }
  }

  const { block, blocks } = hopcroft(delta, accept, n, C);
  if (blocks > maxStates) return blocks;

  // Renumber blocks breadth-first from the start's block, on the class-level table.
  const rep = new Int32Array(blocks).fill(-1);
  for (let s = 0; s < n; s++) if (rep[block[s]] < 0) rep[block[s]] = s;
  const id = new Int32Array(blocks).fill(-1);
  const order: number[] = [block[index[0]]];
  id[order[0]] = 0;
  const rows = new Int32Array(blocks * C);
  const acc = new Uint8Array(blocks);
  for (let h = 0; h < order.length; h++) {
    const r = rep[order[h]];
    acc[h] = accept[r];
    for (let c = 0; c < C; c++) {
      const t = delta[r * C + c];
      if (t < 0) {
        rows[h * C + c] = -1;
        continue;
      }
      const b = block[t];
      if (id[b] < 0) id[b] = order.push(b) - 1;
      rows[h * C + c] = id[b];
    }
  }
  const states = order.length;
  const dist = distances(rows, acc, states, C);
  const next = new Uint16Array(states * 256);
  for (let s = 0; s < states; s++) {
    for (let byte = 0; byte < 256; byte++) {
      const t = rows[s * C + dfa.classOf[byte]];
      next[s * 256 + byte] = t < 0 ? DEAD : t;
    }
  }
  return { states, next, dist, accept: acc };
}

/**
 * Hopcroft's partition refinement: the block of each state in the coarsest partition that respects
 * acceptance and transitions. Missing transitions (-1) need no sink state: with every block a splitter
 * at the start, the usual "smaller half" rule stays correct for partial DFAs (Valmari and Lehtinen 2008).
 */
function hopcroft(
  delta: Int32Array,
  accept: Uint8Array,
  n: number,
  C: number,
): { block: Int32Array; blocks: number } {
  // Incoming edges of each state, as (source, class) pairs, CSR.
  const inStart = new Int32Array(n + 1);
  for (let i = 0; i < n * C; i++) if (delta[i] >= 0) inStart[delta[i] + 1]++;
  for (let t = 0; t < n; t++) inStart[t + 1] += inStart[t];
  const inSource = new Int32Array(inStart[n]);
  const inClass = new Int32Array(inStart[n]);
  const fill = inStart.slice(0, n);
  for (let i = 0; i < n * C; i++) {
    const t = delta[i];
    if (t < 0) continue;
    const k = fill[t]++;
    inSource[k] = Math.floor(i / C);
    inClass[k] = i % C;
  }

  // Blocks are ranges of `elems`; `loc` is each state's place in it.
  const elems = new Int32Array(n);
  const loc = new Int32Array(n);
  const block = new Int32Array(n);
  const first: number[] = [];
  const end: number[] = [];
  const marked: number[] = [];
  const inWork: boolean[] = [];
  const work: number[] = [];
  let p = 0;
  for (const want of [1, 0]) {
    const b = first.length;
    const from = p;
    for (let s = 0; s < n; s++) if (accept[s] === want) (elems[p] = s, loc[s] = p++, block[s] = b);
    if (p === from) continue;
    first.push(from), end.push(p), marked.push(from), inWork.push(true), work.push(b);
  }

  // Per class: the states whose edge of that class enters the splitter.
  const sources: number[][] = Array.from({ length: C }, () => []);
  const classes: number[] = [];
  const touched: number[] = [];
  while (work.length) {
    const a = work.pop()!;
    inWork[a] = false;
    for (let i = first[a]; i < end[a]; i++) {
      const t = elems[i];
      for (let k = inStart[t]; k < inStart[t + 1]; k++) {
        const c = inClass[k];
        if (sources[c].length === 0) classes.push(c);
        sources[c].push(inSource[k]);
      }
    }
    for (const c of classes) {
      for (const s of sources[c]) {
        const b = block[s];
        const m = marked[b];
        if (m === first[b]) touched.push(b);
        // Swap s into the marked prefix of its block.
        const other = elems[m];
        elems[loc[s]] = other, loc[other] = loc[s];
        elems[m] = s, loc[s] = m;
        marked[b] = m + 1;
      }
      sources[c].length = 0;
      for (const b of touched) {
        const m = marked[b];
        marked[b] = first[b];
        if (m === end[b]) continue;
        // The marked prefix becomes a new block.
        const nb = first.length;
        first.push(first[b]), end.push(m), marked.push(first[b]);
        first[b] = m, marked[b] = m;
        for (let i = first[nb]; i < m; i++) block[elems[i]] = nb;
        if (inWork[b]) inWork.push(true), work.push(nb);
        else if (m - first[nb] <= end[b] - first[b]) inWork.push(true), work.push(nb);
        else inWork.push(false), inWork[b] = true, work.push(b);
      }
      touched.length = 0;
    }
    classes.length = 0;
  }
  return { block, blocks: first.length };
}

/**
 * Float64 reference of sample.wgsl and step_begin.wgsl: the sampling semantics the kernel header defines,
 * and the slot advance.
 *   penalties first: over the last 64 tokens of the slot's history (up to and including pos), each distinct
 *   id loses count·frequency_penalty + presence_penalty.
 *   greedy (temperature ≤ 0 or top_k = 1): argmax, lowest id on ties.
 *   otherwise z = logit / T; support = {i : z_i ≥ t}, t the largest of: min z; the k-th largest z (top_k);
 *   the largest z-value whose "mass of all z ≥ it" still reaches top_p of the mass left by top_k (top_p);
 *   z_max + ln(min_p) (min_p); capped at z_max. Ties at the threshold are all kept.
 *   draw: u = (⌊h / 2^8⌋ + ½) / 2^24, h = pcg(seed ^ pcg(pos·2654435761 + slot)) (u32 arithmetic); the pick
 *   is the first id (in id order) whose running mass e^(z − z_max) over the support exceeds u·total.
 * The GPU finds thresholds by bisection and sums in f32, so a draw that lands within a rounding error of a
 * boundary is reported as `borderline` with the set of ids that are then acceptable.
 * @module
 */
import type { Row } from "./paged.ts";

export interface SampleParams {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed: number;
  /** OpenAI penalties over the last PENALTY_WINDOW tokens (0 or absent: off). */
  frequencyPenalty?: number;
  presencePenalty?: number;
}

/** Tokens (newest first, up to and including pos) that the penalties look at. */
export const PENALTY_WINDOW = 64;

/** The logit row after the frequency/presence penalties of slot `slot` at position `pos`. */
export function penalize(
  row: ArrayLike<number>,
  p: SampleParams,
  hist: Uint32Array,
  slot: number,
  ctx: number,
  pos: number,
): Float64Array {
  const out = Float64Array.from(row);
  const fp = p.frequencyPenalty ?? 0, pp = p.presencePenalty ?? 0;
  if (fp === 0 && pp === 0) return out;
  const counts = new Map<number, number>();
  for (let j = 0; j < Math.min(pos + 1, PENALTY_WINDOW); j++) {
    const t = hist[slot * ctx + pos - j];
    counts.set(t, (counts.get(t) ?? 0) + 1);
  }
  for (const [t, c] of counts) if (t < out.length) out[t] -= c * fp + pp;
  return out;
}

export interface SlotState {
  pos: number;
  limit: number;
  done: number;
}

/** The kernel's PCG hash, u32 in and out. */
export function pcg(v: number): number {
  const s = (Math.imul(v >>> 0, 747796405) + 2891336453) >>> 0;
  const w = Math.imul(((s >>> ((s >>> 28) + 4)) ^ s) >>> 0, 277803737) >>> 0;
  return ((w >>> 22) ^ w) >>> 0;
}

/** The uniform draw in (0, 1) for (seed, position, slot). */
export function drawU(seed: number, pos: number, slot: number): number {
  const h = pcg((seed ^ pcg((Math.imul(pos, 2654435761) + slot) >>> 0)) >>> 0);
  return ((h >>> 8) + 0.5) / 16777216;
}

/** Argmax, lowest id on ties. */
export function argmax(row: ArrayLike<number>): number {
  let bi = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[bi]) bi = i;
  return bi;
}

/** Greedy per the kernel: temperature ≤ 0 or top_k = 1. */
export function isGreedy(p: SampleParams): boolean {
  return !(p.temperature > 0) || p.topK === 1;
}

/**
 * The threshold t on z (see module doc). `slack` > 0 lowers it: the top_p goal grows by that fraction and
 * the min_p bound drops by slack·max(1, |z_max|).
 */
export function threshold(z: Float64Array, p: SampleParams, slack = 0): number {
  const V = z.length;
  const sorted = Float64Array.from(z).sort().reverse();
  const zmax = sorted[0];
  let t = sorted[V - 1];
  if (p.topK > 1 && p.topK < V) t = sorted[p.topK - 1];
  if (p.topP > 0 && p.topP < 1) {
    let total = 0;
    for (let i = 0; i < V && sorted[i] >= t; i++) total += Math.exp(sorted[i] - zmax);
    const goal = Math.min(total, p.topP * total * (1 + slack));
    let mass = 0;
    for (let i = 0; i < V; i++) {
      mass += Math.exp(sorted[i] - zmax);
      // all ties of sorted[i] are in before its mass is judged
      if ((i + 1 === V || sorted[i + 1] !== sorted[i]) && mass >= goal) {
        t = Math.max(t, sorted[i]);
        break;
      }
    }
  }
  if (p.minP > 0) t = Math.max(t, zmax + Math.log(p.minP) - slack * Math.max(1, Math.abs(zmax)));
  return Math.min(t, zmax);
}

export interface SampleDecision {
  /** The reference pick. */
  id: number;
  /** Ids the sampler may ever pick under these parameters (the support), ascending. */
  support: number[];
  /** True when rounding (f32 sums, bisection) could move the pick: then any id of `accept` is right. */
  borderline: boolean;
  accept: number[];
}

/**
 * Relative slack for the GPU's f32 sums over V values (lane chunks, then lanes): a few times the typical
 * √V·2^-24 rounding, so a draw is called borderline only when rounding could really move it.
 */
function slackFor(V: number): number {
  return 8 * Math.sqrt(V) * 2 ** -24;
}

/** One logit row's pick. */
export function sampleRow(
  row: ArrayLike<number>,
  p: SampleParams,
  pos: number,
  slot: number,
): SampleDecision {
  if (isGreedy(p)) {
    const id = argmax(row);
    return { id, support: [id], borderline: false, accept: [id] };
  }
  const slack = slackFor(row.length);
  const z = Float64Array.from(row, (v) => v / p.temperature);
  const zmax = z.reduce((a, b) => Math.max(a, b), -Infinity);
  const above = (t: number) => [...z.keys()].filter((i) => z[i] >= t);
  const support = above(threshold(z, p));
  const loose = above(threshold(z, p, slack));
  let total = 0;
  for (const i of support) total += Math.exp(z[i] - zmax);
  const target = drawU(p.seed, pos, slot) * total;
  const tol = slack * total;
  // The pick is the id whose interval of running mass holds the target; ids whose interval comes within
  // `tol` of it are acceptable too.
  let run = 0;
  let id = support[support.length - 1];
  const accept: number[] = [];
  for (const i of support) {
    const next = run + Math.exp(z[i] - zmax);
    if (run <= target && target < next) id = i;
    if (run - tol <= target && target < next + tol) accept.push(i);
    run = next;
  }
  if (!accept.includes(id)) accept.push(id);
  // A threshold within rounding of an id changes the support itself: then any id of the larger one goes.
  if (loose.length !== support.length) return { id, support, borderline: true, accept: loose };
  return { id, support, borderline: accept.length > 1, accept };
}

/** The slot advance after a pick (a `done` slot is left untouched). */
export function advanceSlot(
  st: SlotState,
  hist: Uint32Array,
  slot: number,
  ctx: number,
  row: Row,
  tok: number,
  eos: number[],
): void {
  if (st.done) return;
  const np = row.pos + 1;
  hist[slot * ctx + np] = tok;
  st.pos = np;
  if (np >= st.limit || eos.includes(tok)) st.done = 1;
}

/** step_begin.wgsl: decode rows take pos from their slot and token from hist[slot, pos]. */
export function stepBeginRef(rows: Row[], slots: SlotState[], hist: Uint32Array, ctx: number): Row[] {
  return rows.map((r) => {
    if (r.kind !== 1) return { ...r };
    const pos = slots[r.slot].pos;
    return { ...r, pos, token: hist[r.slot * ctx + pos] };
  });
}

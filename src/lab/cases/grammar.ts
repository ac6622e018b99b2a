/**
 * Lab cases of `grammar_mask.wgsl` (logits a slot's automaton forbids become −3e38) and
 * `grammar_advance.wgsl` (the automaton moves by the sampled token) through src/ops/grammar.ts. Inputs:
 * random automata per slot (up to the table capacity), a random token byte table (single-byte tokens,
 * empty ones, multi-byte ones mostly over the automata's alphabet), random slot states, positions and
 * limits (inactive and done slots, rows at the very end of their budget and short of it). Both outputs are
 * integer logic and compared exactly.
 * @module
 */
import type { TokenBytes } from "../../grammar/token_bytes.ts";
import {
  grammarAdvance,
  type GrammarBuffers,
  grammarMask,
  packTable,
  packTokenBytes,
  TABLE_WORDS_PER_STATE,
} from "../../ops/grammar.ts";
import type { SlotBuffers } from "../../ops/sample.ts";
import { type CaseInputs, int, type KernelCase, num } from "../case.ts";
import { compare, EXACT } from "../compare.ts";
import { type Bound, BufferSet, readF32, readU32, seal } from "../harness.ts";
import {
  advanceRef,
  allowed,
  type GrammarRefInputs,
  type GrammarSlotState,
  maskRef,
  randomDfa,
} from "../ref/grammar.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import type { SlotState } from "../ref/sample.ts";
import type { Rng } from "../rng.ts";

export interface GrammarInputs extends CaseInputs, GrammarRefInputs {
  /** Table capacity per slot (states). */
  cap: number;
}

/** Bytes most tokens and every automaton draw from: ASCII JSON-ish characters and a two-byte letter. */
const ALPHABET = [...new TextEncoder().encode('{}[]:,"0123456789abcdefnrtu -.\\\u00e9')];

/** A random token table: V ids, a few empty (special-like), one single-byte token per byte value. */
function randomTokens(rng: Rng, V: number, meanLen: number): TokenBytes {
  const parts: number[][] = Array.from({ length: V }, () => {
    if (rng.next() < 0.02) return [];
    const n = 1 + Math.min(15, Math.floor(-Math.log(1 - rng.next()) * (meanLen - 1)));
    return Array.from(
      { length: n },
      () => (rng.next() < 0.9 ? ALPHABET[rng.int(0, ALPHABET.length)] : rng.int(0, 256)),
    );
  });
  if (V >= 512) rng.permutation(V).slice(0, 256).forEach((id, b) => (parts[id] = [b]));
  const offsets = new Uint32Array(V + 1);
  parts.forEach((p, id) => (offsets[id + 1] = offsets[id] + p.length));
  const bytes = new Uint8Array(offsets[V]);
  parts.forEach((p, id) => bytes.set(p, offsets[id]));
  return { vocab: V, offsets, bytes };
}

/**
 * L logit rows over a step of L + 2 rows, one slot per row. By slot index: every fifth inactive, every
 * seventh done, every sixth did not sample (its pos is the row's); limits leave 0, 1, 2, dist[s] − 1,
 * dist[s] or up to 40 tokens after this one. The sampled id at hist[slot, pos + 1] is mostly one the mask
 * allows, sometimes an EOS id, sometimes any id.
 */
export function makeGrammar(
  shape: Record<string, number | string>,
  rng: Rng,
  act: "f16" | "f32",
): GrammarInputs {
  const L = int(shape, "L"), V = int(shape, "V", 2), ctx = int(shape, "ctx", 8), cap = int(shape, "cap");
  const states = Math.min(int(shape, "states"), cap), density = num(shape, "density");
  const R = L + 2;
  const tb = randomTokens(rng, V, num(shape, "len"));
  const emptyId = [...Array(V).keys()].find((t) => tb.offsets[t + 1] === tb.offsets[t]) ?? 0;
  const eos = [emptyId, rng.int(0, V)];
  // Slot 0 takes the largest automaton (the capacity edge when states = cap).
  const dfas = Array.from(
    { length: R },
    (_, s) => randomDfa(rng, s === 0 ? states : rng.int(1, states + 1), ALPHABET, density),
  );
  const rows: Row[] = Array.from(
    { length: R },
    (_, r) => ({ token: rng.int(0, V), pos: rng.int(0, ctx - 2), slot: r, kind: 1 }),
  );
  const lrows = rng.permutation(R).slice(0, L);
  const gstate = dfas.map((d, s) => ({ active: s % 5 === 4 ? 0 : 1, state: rng.int(0, d.states) }));
  const slots: SlotState[] = rows.map((row, s) => {
    const dist = dfas[s].dist[gstate[s].state];
    const lefts = [0, 1, 2, Math.max(0, dist - 1), dist, rng.int(0, 40)];
    const left = Math.min(lefts[s % lefts.length], ctx - 2 - row.pos);
    return { pos: s % 6 === 5 ? row.pos : row.pos + 1, limit: row.pos + 1 + left, done: s % 7 === 6 ? 1 : 0 };
  });
  const logits = Float64Array.from({ length: L * V }, () => Math.fround(rng.signed(8)));
  const hist = Uint32Array.from({ length: R * ctx }, () => rng.int(0, V));
  for (const row of rows) {
    const s = row.slot, left = slots[s].limit - (row.pos + 1);
    const ok = [...Array(V).keys()].filter((t) => allowed(dfas[s], tb, eos, gstate[s].state, left, t));
    const u = rng.next();
    hist[s * ctx + row.pos + 1] = u < 0.75 && ok.length
      ? ok[rng.int(0, ok.length)]
      : u < 0.85
      ? eos[1]
      : rng.int(0, V);
  }
  return { shape, act, V, ctx, cap, logits, lrows, rows, slots, gstate, dfas, tb, eos, hist };
}

function encodeSlots(slots: SlotState[]): Uint32Array {
  return Uint32Array.from(slots.flatMap((s) => [s.pos, s.limit, s.done, 0]));
}

function encodeGstate(g: GrammarSlotState[]): Uint32Array {
  return Uint32Array.from(g.flatMap((x) => [x.active, x.state, 0, 0]));
}

/** Uploads the inputs as the engine lays them out (src/ops/grammar.ts), plus the slot buffers. */
function upload(set: BufferSet, i: GrammarInputs): { s: SlotBuffers; g: GrammarBuffers } {
  const region = i.cap * TABLE_WORDS_PER_STATE;
  const table = new Uint32Array(i.dfas.length * region);
  i.dfas.forEach((d, s) => table.set(packTable(d, i.cap), s * region));
  const s: SlotBuffers = {
    sampling: set.scratch("sampling", 32 * i.slots.length),
    slots: set.upload("slots", encodeSlots(i.slots)),
    hist: set.upload("hist", i.hist),
    eos: set.upload("eos", Uint32Array.from([i.eos.length, ...i.eos])),
    ctx: i.ctx,
  };
  const g: GrammarBuffers = {
    tokens: set.upload("tokens", packTokenBytes(i.tb)),
    state: set.upload("gstate", encodeGstate(i.gstate), { mutable: "control" }),
    table: set.upload("table", table),
    V: i.V,
    maxStates: i.cap,
  };
  return { s, g };
}

/** Step-row buffers of a bound case. */
function rowBuffers(set: BufferSet, i: GrammarInputs) {
  return {
    lrows: set.upload("lrows", Uint32Array.from(i.lrows)),
    rows: set.upload("rows", encodeRows(i.rows)),
  };
}

const SHAPE_KEYS = {
  L: "logit rows",
  V: "vocabulary",
  states: "largest automaton (states; slot 0 has it)",
  cap: "table capacity per slot (states)",
  density: "share of alphabet bytes with a transition per state",
  len: "mean token length (bytes)",
  ctx: "token history length per slot",
};

export const grammarMaskCase: KernelCase<GrammarInputs> = {
  files: ["grammar_mask.wgsl"],
  summary: "per logit row of a constrained slot: tokens that leave the automaton or its budget get −3e38",
  // Qwen3 vocabulary, batch 1, a JSON-schema-sized automaton whose states allow most bytes.
  defaults: { L: 1, V: 151936, states: 4096, cap: 4096, density: 0.9, len: 6, ctx: 4096 },
  small: { L: 7, V: 1031, states: 40, cap: 64, density: 0.6, len: 3, ctx: 64 },
  keys: SHAPE_KEYS,
  make: (shape, rng, env) => makeGrammar(shape, rng, env.act),
  async bind(gpu, i): Promise<Bound> {
    const set = new BufferSet(gpu);
    const { s, g } = upload(set, i);
    const logits = set.upload("logits", Float32Array.from(i.logits), { mutable: true });
    const ctx = set.context();
    await grammarMask(ctx, { ...rowBuffers(set, i), logits, L: i.lrows.length, V: i.V, s, g });
    return seal(
      set,
      ctx,
      { maxKvLen: 1 },
      async () => ({ logits: await readF32(gpu, logits, i.logits.length) }),
    );
  },
  check: (got, i) => [compare("logits", got.logits, maskRef(i), EXACT)],
  tolerance: () => ({ logits: EXACT }),
  // Per row: each token's offsets and bytes, a table word per byte walked, the logit written.
  cost: (shape) => ({ bytes: Number(shape.L) * Number(shape.V) * (12 + 5 * Number(shape.len)), flops: 0 }),
};

export const grammarAdvanceCase: KernelCase<GrammarInputs> = {
  files: ["grammar_advance.wgsl"],
  summary: "per logit row of a constrained slot that sampled: walk the sampled token, store the new state",
  defaults: { L: 8, V: 151936, states: 4096, cap: 4096, density: 0.9, len: 6, ctx: 4096 },
  small: { L: 9, V: 1031, states: 40, cap: 64, density: 0.6, len: 3, ctx: 64 },
  keys: SHAPE_KEYS,
  make: (shape, rng, env) => makeGrammar(shape, rng, env.act),
  async bind(gpu, i): Promise<Bound> {
    const set = new BufferSet(gpu);
    const { s, g } = upload(set, i);
    const ctx = set.context();
    await grammarAdvance(ctx, { ...rowBuffers(set, i), L: i.lrows.length, s, g });
    return seal(
      set,
      ctx,
      { maxKvLen: 1 },
      async () => ({ gstate: await readU32(gpu, g.state, 4 * i.gstate.length) }),
    );
  },
  check: (got, i) => [compare("gstate", got.gstate, Float64Array.from(encodeGstate(advanceRef(i))), EXACT)],
  tolerance: () => ({ gstate: EXACT }),
  cost: (shape) => ({ bytes: Number(shape.L) * (16 * 3 + 9 * Number(shape.len)), flops: 0 }),
};

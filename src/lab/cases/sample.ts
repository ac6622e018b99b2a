/**
 * Lab cases of `sample.wgsl` (pick the next ids, advance the slots) and `step_begin.wgsl` (decode rows
 * read their token and position from the slots) through src/ops/sample.ts.
 * @module
 */
import type { Gpu } from "../../gpu/device.ts";
import { sample, stepBegin } from "../../ops/sample.ts";
import { type CaseInputs, compareAll, int, type KernelCase, num } from "../case.ts";
import { compare, EXACT, type OutputReport, type Tolerance } from "../compare.ts";
import { type Bound, BufferSet, readF32, readU32, seal } from "../harness.ts";
import { encodeRows, type Row } from "../ref/paged.ts";
import {
  advanceSlot,
  penalize,
  type SampleParams,
  sampleRow,
  type SlotState,
  stepBeginRef,
} from "../ref/sample.ts";
import type { Rng } from "../rng.ts";

export interface SampleInputs extends CaseInputs {
  V: number;
  ctx: number;
  /** (L, V) f32 values. */
  logits: Float64Array;
  /** Step row of each logit row. */
  lrows: number[];
  rows: Row[];
  /** Per slot. */
  params: SampleParams[];
  slots: SlotState[];
  /** (slots, ctx) token history. */
  hist: Uint32Array;
  eos: number[];
}

/** Ids and slot state exactly; the (penalised in place) logits to f32 rounding. */
const SAMPLE_TOL: Record<string, Tolerance> = {
  hist: EXACT,
  slots: EXACT,
  logits: { atol: 1e-6, rtol: 1e-6 },
};

/** Uploads sampler inputs and records `sample()` (exported: tests build inputs by hand). */
export async function bindSample(gpu: Gpu, i: SampleInputs): Promise<Bound> {
  const set = new BufferSet(gpu);
  const sp = new DataView(new ArrayBuffer(32 * i.params.length));
  i.params.forEach((p, s) => {
    sp.setFloat32(32 * s, p.temperature, true);
    sp.setUint32(32 * s + 4, p.topK, true);
    sp.setFloat32(32 * s + 8, p.topP, true);
    sp.setFloat32(32 * s + 12, p.minP, true);
    sp.setUint32(32 * s + 16, p.seed >>> 0, true);
    sp.setFloat32(32 * s + 20, p.frequencyPenalty ?? 0, true);
    sp.setFloat32(32 * s + 24, p.presencePenalty ?? 0, true);
  });
  const slots = set.upload("slots", encodeSlots(i.slots), { mutable: "control" });
  const hist = set.upload("hist", i.hist, { mutable: "control" });
  const s = {
    sampling: set.upload("sampling", sp),
    slots,
    hist,
    eos: set.upload("eos", Uint32Array.from([i.eos.length, ...i.eos])),
    ctx: i.ctx,
  };
  const logits = set.upload("logits", Float32Array.from(i.logits), { mutable: true });
  const ctx = set.context();
  await sample(ctx, {
    logits,
    lrows: set.upload("lrows", Uint32Array.from(i.lrows)),
    rows: set.upload("rows", encodeRows(i.rows)),
    L: i.lrows.length,
    V: i.V,
    s,
  });
  return seal(set, ctx, { maxKvLen: 1 }, async () => ({
    hist: await readU32(gpu, hist, i.hist.length),
    slots: await readU32(gpu, slots, 4 * i.slots.length),
    logits: await readF32(gpu, logits, i.logits.length),
  }));
}

function encodeSlots(slots: SlotState[]): Uint32Array {
  return Uint32Array.from(slots.flatMap((s) => [s.pos, s.limit, s.done, 0]));
}

/** The GPU's pick for each logit row (−1 where the slot was already done). */
export function picksOf(got: Record<string, Float64Array>, i: SampleInputs): number[] {
  return i.lrows.map((r) => {
    const row = i.rows[r];
    return i.slots[row.slot].done ? -1 : got.hist[row.slot * i.ctx + row.pos + 1];
  });
}

/**
 * Expected hist and slot state. Where the reference calls a draw borderline (within f32 rounding of an
 * interval edge or of a threshold), the GPU's pick is taken if it is one of the acceptable ids.
 */
export function checkSample(got: Record<string, Float64Array>, i: SampleInputs): OutputReport[] {
  const hist = Uint32Array.from(i.hist);
  const slots = i.slots.map((s) => ({ ...s }));
  const picks = picksOf(got, i);
  const notes: string[] = [];
  const logits = Float64Array.from(i.logits);
  i.lrows.forEach((r, l) => {
    const row = i.rows[r];
    if (i.slots[row.slot].done) return; // the kernel leaves a done slot's row alone
    const z = penalize(
      i.logits.subarray(l * i.V, (l + 1) * i.V),
      i.params[row.slot],
      i.hist,
      row.slot,
      i.ctx,
      row.pos,
    );
    logits.set(z, l * i.V);
    const d = sampleRow(z, i.params[row.slot], row.pos, row.slot);
    let tok = d.id;
    if (d.borderline && picks[l] !== d.id && d.accept.includes(picks[l])) {
      notes.push(
        `row ${l}: draw within rounding of an edge: reference ${d.id}, gpu ${picks[l]} (acceptable)`,
      );
      tok = picks[l];
    }
    advanceSlot(slots[row.slot], hist, row.slot, i.ctx, row, tok, i.eos);
  });
  const reports = compareAll(got, {
    hist: Float64Array.from(hist),
    slots: Float64Array.from(encodeSlots(slots)),
    logits,
  }, SAMPLE_TOL);
  reports[0].notes = notes;
  return reports;
}

/**
 * Random sampler inputs: L logit rows over a step of L + 2 rows, each row its own slot; some slots are
 * already done, some reach their limit with this token, and EOS holds row 0's argmax. A slot's history is
 * drawn from a few of its row's highest logits and random ids, so penalties (repeats) change the pick.
 */
export function makeSample(
  shape: Record<string, number | string>,
  rng: Rng,
  act: "f16" | "f32",
): SampleInputs {
  const L = int(shape, "L"), V = int(shape, "V"), ctx = int(shape, "ctx", 4);
  const R = L + 2;
  const rows: Row[] = Array.from(
    { length: R },
    (_, r) => ({ token: rng.int(0, V), pos: rng.int(0, ctx - 2), slot: r, kind: 1 }),
  );
  const lrows = rng.permutation(R).slice(0, L);
  const logits = Float64Array.from({ length: L * V }, () => Math.fround(rng.signed(num(shape, "spread"))));
  const params: SampleParams[] = rows.map((_, s) => ({
    temperature: Math.fround(num(shape, "temp")),
    topK: int(shape, "topk", 0),
    topP: Math.fround(num(shape, "topp")),
    minP: Math.fround(num(shape, "minp")),
    seed: (int(shape, "seed", 0) + 7919 * s) >>> 0,
    frequencyPenalty: Math.fround(num(shape, "freq")),
    presencePenalty: Math.fround(num(shape, "pres")),
  }));
  const slots: SlotState[] = rows.map((row, s) => ({
    pos: row.pos,
    limit: row.pos + 1 + (s % 3 === 1 ? 0 : rng.int(1, 50)),
    done: s % 5 === 4 ? 1 : 0,
  }));
  const hist = new Uint32Array(R * ctx);
  for (let s = 0; s < R; s++) {
    const l = lrows.indexOf(s);
    const row = l < 0 ? null : logits.subarray(l * V, (l + 1) * V);
    const pool = row ? [...row.keys()].sort((a, b) => row[b] - row[a]).slice(0, 4) : [];
    for (let p = 0; p < ctx; p++) {
      hist[s * ctx + p] = pool.length && rng.next() < 0.5 ? pool[rng.int(0, pool.length)] : rng.int(1, V);
    }
  }
  let top = 0;
  for (let v = 1; v < V; v++) if (logits[v] > logits[top]) top = v;
  return { shape, act, V, ctx, logits, lrows, rows, params, slots, hist, eos: [top, rng.int(0, V)] };
}

export const sampleCase: KernelCase<SampleInputs> = {
  files: ["sample.wgsl"],
  summary: "per logit row: greedy or temperature/top-k/top-p/min-p sampling, then the slot advance",
  // Qwen3 vocabulary, its recommended sampling (T 0.7, top-k 20, top-p 0.8).
  defaults: {
    L: 4,
    V: 151936,
    temp: 0.7,
    topk: 20,
    topp: 0.8,
    minp: 0,
    freq: 0,
    pres: 0,
    seed: 1234,
    spread: 8,
    ctx: 4096,
  },
  small: {
    L: 5,
    V: 1031,
    temp: 0.8,
    topk: 50,
    topp: 0.9,
    minp: 0.02,
    freq: 0.3,
    pres: 0.5,
    seed: 7,
    spread: 4,
    ctx: 64,
  },
  keys: {
    L: "logit rows sampled",
    V: "vocabulary",
    temp: "temperature (0: greedy)",
    topk: "top-k (0 off, 1 greedy)",
    topp: "top-p (1 off)",
    minp: "min-p (0 off)",
    freq: "frequency penalty (0 off)",
    pres: "presence penalty (0 off)",
    seed: "base seed (slot s uses seed + 7919·s)",
    spread: "logits are U(±spread)",
    ctx: "token history length per slot",
  },
  make: (shape, rng, env) => makeSample(shape, rng, env.act),
  bind: bindSample,
  check: checkSample,
  tolerance: () => SAMPLE_TOL,
  cost(shape) {
    const L = Number(shape.L), V = Number(shape.V);
    // Bisection passes re-read the row: argmax, 32 top-k passes, 33 top-p passes, the draw.
    const passes = 2 + (Number(shape.topk) > 1 ? 32 : 0) + (Number(shape.topp) < 1 ? 33 : 0);
    return { bytes: L * V * 4 * passes, flops: L * V * 3 * passes };
  },
};

export interface StepBeginInputs extends CaseInputs {
  rows: Row[];
  slots: SlotState[];
  hist: Uint32Array;
  ctx: number;
}

export const stepBeginCase: KernelCase<StepBeginInputs> = {
  files: ["step_begin.wgsl"],
  summary: "decode rows take their position from the slot and their token from its history",
  defaults: { R: 64, slots: 8, ctx: 4096 },
  small: { R: 67, slots: 5, ctx: 37 },
  keys: { R: "step rows (mixed prefill and decode)", slots: "sequences", ctx: "history length per slot" },
  make(shape, rng, env) {
    const R = int(shape, "R"), S = int(shape, "slots"), ctx = int(shape, "ctx", 2);
    const rows: Row[] = Array.from({ length: R }, () => ({
      token: rng.int(1, 50000),
      pos: rng.int(0, ctx),
      slot: rng.int(0, S),
      kind: rng.next() < 0.6 ? 1 : 0,
    }));
    const slots = Array.from({ length: S }, () => ({ pos: rng.int(0, ctx), limit: ctx, done: 0 }));
    return {
      shape,
      act: env.act,
      rows,
      slots,
      hist: Uint32Array.from({ length: S * ctx }, () => rng.int(1, 50000)),
      ctx,
    };
  },
  async bind(gpu, i) {
    const set = new BufferSet(gpu);
    const rows = set.upload("rows", encodeRows(i.rows), { mutable: true });
    const s = {
      slots: set.upload("slots", encodeSlots(i.slots)),
      hist: set.upload("hist", i.hist),
      ctx: i.ctx,
      sampling: set.scratch("sampling", 32 * i.slots.length),
      eos: set.upload("eos", new Uint32Array(4)),
    };
    const ctx = set.context();
    await stepBegin(ctx, { rows, R: i.rows.length, s });
    return seal(
      set,
      ctx,
      { maxKvLen: 1 },
      async () => ({ rows: await readU32(gpu, rows, 4 * i.rows.length) }),
    );
  },
  check: (
    got,
    i,
  ) => [
    compare(
      "rows",
      got.rows,
      Float64Array.from(encodeRows(stepBeginRef(i.rows, i.slots, i.hist, i.ctx))),
      EXACT,
    ),
  ],
  tolerance: () => ({ rows: EXACT }),
  cost: (shape) => ({ bytes: Number(shape.R) * 16 * 3, flops: 0 }),
};

/**
 * sample.wgsl and step_begin.wgsl through src/ops/sample.ts against src/lab/ref/sample.ts.
 * Sampling outputs are ids and slot state, compared exactly; a draw the reference calls borderline (within
 * f32 rounding of an interval edge: a few in a thousand) may take the neighbouring id.
 * Covered: greedy with ties (lowest id), seeded reproducibility, top-k = 1 equals greedy, top-k / top-p /
 * min-p never leave their support over hundreds of seeded draws (and do leave it when switched off, so the
 * checks can fail), random parameter mixes, frequency/presence penalties (window, counts), the slot advance
 * (history write, position, limit, EOS, done). The penalised logits are compared to |d| ≤ 1e-6 + 1e-6·|ref|.
 */
import { describe, expect, test } from "vitest";
import type { Gpu } from "../../src/gpu/device.ts";
import {
  bindSample,
  checkSample,
  picksOf,
  sampleCase,
  type SampleInputs,
  stepBeginCase,
} from "../../src/lab/cases/sample.ts";
import { describeReport } from "../../src/lab/compare.ts";
import { runOnce } from "../../src/lab/harness.ts";
import { argmax, type SampleParams, sampleRow } from "../../src/lab/ref/sample.ts";
import { Rng } from "../../src/lab/rng.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();
const CTX = 32;

/** L logit rows (given, or one row repeated), step row r = slot r at position 3 + r % 7. */
function inputs(
  rows: Float64Array[],
  params: (slot: number) => SampleParams,
  eos: number[] = [],
): SampleInputs {
  const V = rows[0].length;
  const L = rows.length;
  const logits = new Float64Array(L * V);
  rows.forEach((r, l) => logits.set(r, l * V));
  const stepRows = rows.map((_, r) => ({ token: 1, pos: 3 + (r % 7), slot: r, kind: 1 }));
  return {
    shape: {},
    act: "f32",
    V,
    ctx: CTX,
    logits,
    lrows: rows.map((_, r) => r),
    rows: stepRows,
    params: rows.map((_, s) => params(s)),
    slots: stepRows.map((r) => ({ pos: r.pos, limit: CTX - 1, done: 0 })),
    hist: Uint32Array.from({ length: L * CTX }, (_, k) => 1 + (k % 5)),
    eos,
  };
}

function logitRow(seed: number, V: number, spread: number): Float64Array {
  const rng = new Rng(seed);
  return Float64Array.from({ length: V }, () => Math.fround(rng.signed(spread)));
}

/** Runs the sampler once; asserts it matches the reference exactly; returns the picks. */
async function draw(gpu: Gpu, i: SampleInputs): Promise<number[]> {
  const b = await bindSample(gpu, i);
  try {
    runOnce(b);
    const got = await b.read();
    const reports = checkSample(got, i);
    for (const r of reports) expect(r.ok, reports.map(describeReport).join("\n")).toBe(true);
    // A draw within f32 rounding of an interval edge may take the neighbouring id; that should be rare.
    expect(reports[0].notes!.length, reports[0].notes!.join("\n")).toBeLessThanOrEqual(
      Math.ceil(0.05 * i.lrows.length),
    );
    return picksOf(got, i);
  } finally {
    b.destroy();
  }
}

/** 4 × 64 seeded draws from one logit row. */
async function manyDraws(gpu: Gpu, row: Float64Array, p: Omit<SampleParams, "seed">): Promise<number[]> {
  const out: number[] = [];
  for (const base of [1, 77, 4242, 99991]) {
    out.push(...await draw(gpu, inputs(Array(64).fill(row), (s) => ({ ...p, seed: base + 7919 * s }))));
  }
  return out;
}

function supportOf(row: Float64Array, p: Omit<SampleParams, "seed">): Set<number> {
  return new Set(sampleRow(row, { ...p, seed: 0 }, 0, 0).support);
}

for (const path of ["f16", "f32"] as const) {
  describe(`sample, ${path} device`, () => {
    test(
      "greedy picks the lowest id among tied maxima (temperature 0, or top-k 1 at any temperature)",
      on(path, async (gpu) => {
        const V = 1031;
        // Tied pairs in different lanes, in the same lane (ids 256 apart), and at the end of the row.
        const pairs = [[17, 900], [3, 259], [1029, 1030], [0, 1024]];
        const rows = pairs.map(([a, b], k) => {
          const r = logitRow(k, V, 1);
          r[a] = r[b] = 5;
          return r;
        });
        const picks = await draw(
          gpu,
          inputs(
            rows,
            (s) => ({ temperature: s % 2 ? 0 : 1.3, topK: s % 2 ? 0 : 1, topP: 1, minP: 0, seed: s }),
          ),
        );
        expect(picks).toEqual(pairs.map(([a]) => a));
      }),
    );

    test(
      "seeded sampling is reproducible and depends on the seed",
      on(path, async (gpu) => {
        const row = logitRow(5, 1031, 2);
        const p = (seed: number) => (s: number) => ({
          temperature: 1,
          topK: 0,
          topP: 1,
          minP: 0,
          seed: seed + s,
        });
        const a = await draw(gpu, inputs(Array(16).fill(row), p(10)));
        const b = await draw(gpu, inputs(Array(16).fill(row), p(10)));
        const c = await draw(gpu, inputs(Array(16).fill(row), p(11)));
        expect(b).toEqual(a);
        expect(c).not.toEqual(a);
        expect(new Set(a).size).toBeGreaterThan(4);
      }),
    );

    test(
      "top-k keeps only the k largest logits over 256 seeded draws",
      on(path, async (gpu) => {
        const row = logitRow(6, 1031, 1);
        const p = { temperature: 1, topK: 5, topP: 1, minP: 0 };
        const ids = await manyDraws(gpu, row, p);
        const top5 = new Set([...row.keys()].sort((x, y) => row[y] - row[x]).slice(0, 5));
        expect(ids.filter((i) => !top5.has(i))).toEqual([]);
        expect(new Set(ids)).toEqual(top5); // all five occur
        // Control: without top-k the same draws leave the top 5 (so the check above can fail).
        expect((await manyDraws(gpu, row, { ...p, topK: 0 })).some((i) => !top5.has(i))).toBe(true);
      }),
    );

    test(
      "top-p keeps the smallest high-probability set reaching p over 256 seeded draws",
      on(path, async (gpu) => {
        const row = logitRow(7, 1031, 4);
        const p = { temperature: 0.9, topK: 0, topP: 0.5, minP: 0 };
        const support = supportOf(row, p);
        expect(support.size).toBeGreaterThan(10);
        expect(support.size).toBeLessThan(300);
        const ids = await manyDraws(gpu, row, p);
        expect(ids.filter((i) => !support.has(i))).toEqual([]);
        expect((await manyDraws(gpu, row, { ...p, topP: 1 })).some((i) => !support.has(i))).toBe(true);
      }),
    );

    test(
      "min-p keeps ids with p ≥ min_p·p_max over 256 seeded draws",
      on(path, async (gpu) => {
        const row = logitRow(8, 1031, 4);
        const p = { temperature: 1, topK: 0, topP: 1, minP: 0.3 };
        const support = supportOf(row, p);
        const zmax = Math.max(...row);
        for (let i = 0; i < row.length; i++) expect(support.has(i)).toBe(row[i] >= zmax + Math.log(0.3));
        const ids = await manyDraws(gpu, row, p);
        expect(ids.filter((i) => !support.has(i))).toEqual([]);
        expect((await manyDraws(gpu, row, { ...p, minP: 0 })).some((i) => !support.has(i))).toBe(true);
      }),
    );

    test(
      "random rows under parameter mixes match the reference draw for draw",
      on(path, async (gpu) => {
        const mixes = [
          { temp: 0, topk: 0, topp: 1, minp: 0 },
          { temp: 0.7, topk: 20, topp: 0.8, minp: 0 },
          { temp: 1.2, topk: 0, topp: 0.95, minp: 0.05 },
          { temp: 0.5, topk: 64, topp: 1, minp: 0.1 },
          { temp: 2, topk: 3, topp: 0.5, minp: 0 },
          { temp: 1, topk: 0, topp: 1, minp: 0 },
        ];
        for (const [k, m] of mixes.entries()) {
          await expectCase(gpu, sampleCase, {
            ...m,
            L: 9,
            V: k % 2 ? 4099 : 1031,
            seed: 100 + k,
            spread: 3 + k,
          }, k);
        }
      }),
    );

    test(
      "slot advance: history write, position, length limit, EOS, done slots untouched",
      on(path, async (gpu) => {
        const V = 37;
        const rows = [7, 7, 11, 7].map((top, k) => {
          const r = logitRow(20 + k, V, 1);
          r[top] = 9;
          return r;
        });
        const i = inputs(rows, (s) => ({ temperature: 0, topK: 0, topP: 1, minP: 0, seed: s }), [11]);
        i.rows = [{ token: 1, pos: 5, slot: 0, kind: 1 }, { token: 1, pos: 9, slot: 1, kind: 1 }, {
          token: 1,
          pos: 2,
          slot: 2,
          kind: 1,
        }, { token: 1, pos: 4, slot: 3, kind: 1 }];
        i.slots = [{ pos: 5, limit: 20, done: 0 }, { pos: 9, limit: 10, done: 0 }, {
          pos: 2,
          limit: 20,
          done: 0,
        }, { pos: 4, limit: 20, done: 1 }];
        const b = await bindSample(gpu, i);
        try {
          runOnce(b);
          const got = await b.read();
          const st = (s: number) => [...got.slots.subarray(4 * s, 4 * s + 3)];
          const hist = (s: number, p: number) => got.hist[s * CTX + p];
          expect([hist(0, 6), ...st(0)]).toEqual([7, 6, 20, 0]); // next id at pos + 1, pos advanced
          expect([hist(1, 10), ...st(1)]).toEqual([7, 10, 10, 1]); // reached its limit: done
          expect([hist(2, 3), ...st(2)]).toEqual([11, 3, 20, 1]); // EOS: done
          expect([hist(3, 5), ...st(3)]).toEqual([i.hist[3 * CTX + 5], 4, 20, 1]); // already done: untouched
          expect([...got.hist]).toEqual(
            [...got.hist].map((v, k) => ([6, CTX + 10, 2 * CTX + 3].includes(k) ? v : i.hist[k])),
          );
          for (const r of checkSample(got, i)) expect(r.ok, describeReport(r)).toBe(true);
          expect(argmax(rows[2])).toBe(11);
        } finally {
          b.destroy();
        }
      }),
    );

    test(
      "frequency/presence penalties: the last 64 tokens only, count·frequency + presence, before greedy",
      on(path, async (gpu) => {
        const V = 37;
        const CTX2 = 100;
        const row = logitRow(30, V, 1);
        row[7] = 3;
        row[9] = 2.5;
        row[11] = 2.45;
        // Slot 0 at pos 80: id 7 three times in the window (pos 17..80), id 11 only before it (pos 10).
        const hist = Uint32Array.from({ length: CTX2 }, (_, k) => 20 + (k % 5));
        for (const k of [80, 50, 30]) hist[k] = 7;
        hist[10] = 11;
        const p = {
          temperature: 0,
          topK: 0,
          topP: 1,
          minP: 0,
          seed: 1,
          frequencyPenalty: 0.3,
          presencePenalty: 0.2,
        };
        const i: SampleInputs = {
          shape: {},
          act: "f32",
          V,
          ctx: CTX2,
          logits: row,
          lrows: [0],
          rows: [{ token: 7, pos: 80, slot: 0, kind: 1 }],
          params: [p],
          slots: [{ pos: 80, limit: 99, done: 0 }],
          hist,
          eos: [],
        };
        const b = await bindSample(gpu, i);
        try {
          runOnce(b);
          const got = await b.read();
          for (const r of checkSample(got, i)) expect(r.ok, describeReport(r)).toBe(true);
          expect(got.logits[7]).toBeCloseTo(3 - (3 * 0.3 + 0.2), 6); // 1.9
          expect(got.logits[11]).toBe(Math.fround(2.45)); // outside the window: untouched
          // 10 of the window's 64 are id 20
          expect(got.logits[20]).toBeCloseTo(row[20] - (10 * 0.3 + 0.2), 5);
          expect(picksOf(got, i)).toEqual([9]); // 7 fell to 1.9, below 9 (2.5) and 11 (2.45)
        } finally {
          b.destroy();
        }
        // Mixed with sampling, through the case (penalised logits, picks and slots against the reference).
        await expectCase(gpu, sampleCase, {
          L: 7,
          V: 1031,
          temp: 0.9,
          topk: 0,
          topp: 0.95,
          minp: 0,
          freq: 0.4,
          pres: 0.6,
          ctx: 150,
        }, 3);
      }),
    );

    test(
      "step_begin: decode rows take pos and token from their slot; prefill rows untouched",
      on(path, async (gpu) => {
        await expectCase(gpu, stepBeginCase, { R: 67, slots: 5, ctx: 37 }, 1);
        await expectCase(gpu, stepBeginCase, { R: 1, slots: 1, ctx: 2 }, 2);
      }),
    );
  });
}

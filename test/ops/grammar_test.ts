/**
 * grammar_mask.wgsl and grammar_advance.wgsl through src/ops/grammar.ts against src/lab/ref/grammar.ts,
 * exactly (integer logic: a logit is untouched or −3e38). Covered: random automata, token tables and slot
 * states on odd vocabularies over several seeds (inactive and done slots untouched, every constrained row
 * keeps at least one token); the budget edge worked by hand on `(yes|no)` (left = 0, left < dist, EOS only
 * in an accepting state, multi-byte and empty tokens); the advance (walk, EOS, rows that did not sample);
 * and the sampler on masked rows: top-k / top-p / min-p stay within the allowed tokens and match the
 * reference (its bisection ignores the −3e38 values).
 */
import { describe, expect, test } from "vitest";
import type { Gpu } from "../../src/gpu/device.ts";
import { DEAD } from "../../src/grammar/dfa.ts";
import type { TokenBytes } from "../../src/grammar/token_bytes.ts";
import type { KernelCase } from "../../src/lab/case.ts";
import {
  grammarAdvanceCase,
  type GrammarInputs,
  grammarMaskCase,
  makeGrammar,
} from "../../src/lab/cases/grammar.ts";
import { bindSample, checkSample, picksOf, type SampleInputs } from "../../src/lab/cases/sample.ts";
import { describeReport } from "../../src/lab/compare.ts";
import { runOnce } from "../../src/lab/harness.ts";
import { allowed, makeDfa, MASKED } from "../../src/lab/ref/grammar.ts";
import { Rng } from "../../src/lab/rng.ts";
import { devices, expectCase } from "../util/lab.ts";

const { on } = devices();

/** Runs a case on hand-made inputs; asserts it matches its reference; returns the outputs. */
async function run(
  gpu: Gpu,
  c: KernelCase<GrammarInputs>,
  i: GrammarInputs,
): Promise<Record<string, Float64Array>> {
  const b = await c.bind(gpu, i);
  try {
    runOnce(b);
    const got = await b.read();
    for (const r of c.check(got, i)) expect(r.ok, describeReport(r)).toBe(true);
    expect(gpu.takeErrors()).toEqual([]);
    return got;
  } finally {
    b.destroy();
  }
}

/** The automaton of `(yes|no)`: 0 -y-> 1 -e-> 2 -s-> 3 (accept); 0 -n-> 4 -o-> 3. */
function yesNo() {
  const next = new Uint16Array(5 * 256).fill(DEAD);
  const edge = (s: number, c: string, t: number) => (next[s * 256 + c.charCodeAt(0)] = t);
  edge(0, "y", 1), edge(1, "e", 2), edge(2, "s", 3), edge(0, "n", 4), edge(4, "o", 3);
  return makeDfa(5, next, Uint8Array.of(0, 0, 0, 1, 0));
}

/** A token table from strings (UTF-8); "" is a token without bytes. */
function table(pieces: string[]): TokenBytes {
  const enc = pieces.map((p) => new TextEncoder().encode(p));
  const offsets = new Uint32Array(pieces.length + 1);
  enc.forEach((e, t) => (offsets[t + 1] = offsets[t] + e.length));
  const bytes = new Uint8Array(offsets[pieces.length]);
  enc.forEach((e, t) => bytes.set(e, offsets[t]));
  return { vocab: pieces.length, offsets, bytes };
}

// id:          0   1    2    3    4    5    6      7     8     9       10
const PIECES = ["", "y", "e", "s", "n", "o", "yes", "no", "ye", " yes", ""];
const NAMES = PIECES.map((p, t) => (t === 0 ? "<eos>" : p || "<empty>"));
const EOS = 0;

/** One slot per case: (state, left); logits all 1.5 so a masked one shows. */
function yesNoInputs(cases: [number, number][]): GrammarInputs {
  const V = PIECES.length, ctx = 16;
  const rows = cases.map((_, r) => ({ token: 1, pos: 3 + r, slot: r, kind: 1 }));
  return {
    shape: {},
    act: "f32",
    V,
    ctx,
    cap: 8,
    logits: new Float64Array(cases.length * V).fill(1.5),
    lrows: rows.map((_, r) => r),
    rows,
    slots: cases.map(([, left], r) => ({ pos: rows[r].pos + 1, limit: rows[r].pos + 1 + left, done: 0 })),
    gstate: cases.map(([state]) => ({ active: 1, state })),
    dfas: cases.map(() => yesNo()),
    tb: table(PIECES),
    eos: [EOS],
    hist: new Uint32Array(cases.length * ctx).fill(1),
  };
}

/** The token names a mask output leaves unmasked on logit row `l`. */
function kept(got: Float64Array, V: number, l: number): string[] {
  return NAMES.filter((_, t) => got[l * V + t] !== MASKED);
}

for (const path of ["f16", "f32"] as const) {
  describe(`grammar kernels, ${path} device`, () => {
    test(
      "mask: random automata and slots on odd vocabularies match the reference exactly",
      on(path, async (gpu) => {
        for (const [k, V] of [1000, 4099, 1031].entries()) {
          for (const seed of [1, 2]) {
            const shape = {
              ...grammarMaskCase.small,
              V,
              L: 6 + k,
              states: k === 2 ? 64 : 40,
              density: 0.5 + 0.2 * k,
            };
            await expectCase(gpu, grammarMaskCase, shape, seed + 10 * k);
            // Every constrained row keeps a token, some rows lose some (facts of the reference, which the
            // exact comparison above holds the GPU to).
            const i = makeGrammar({ ...shape }, new Rng(seed + 10 * k), "f32");
            let partial = 0;
            i.lrows.forEach((r) => {
              const row = i.rows[r], g = i.gstate[row.slot], st = i.slots[row.slot];
              if (!g.active || st.done) return;
              const left = st.limit - row.pos - 1;
              const n = [...Array(V).keys()].filter((t) =>
                allowed(i.dfas[row.slot], i.tb, i.eos, g.state, left, t)
              ).length;
              expect(n, `row ${r}`).toBeGreaterThan(0);
              if (n < V) partial++;
            });
            expect(partial).toBeGreaterThan(0);
          }
        }
      }),
    );

    test(
      "mask on (yes|no), worked by hand: the budget edge (left 0, left < dist), EOS, empty tokens",
      on(path, async (gpu) => {
        const cases: [number, number][] = [[0, 9], [0, 0], [0, 1], [0, 3], [3, 5], [3, 0], [4, 0], [2, 2]];
        const i = yesNoInputs(cases);
        const got = (await run(gpu, grammarMaskCase, i)).logits;
        const rows = cases.map((_, l) => kept(got, i.V, l));
        // dist: 0 → 2 (via "no"), y-state 1 → 2, ye-state 2 → 1, n-state 4 → 1, 3 accepting.
        expect(rows[0]).toEqual(["y", "n", "yes", "no", "ye"]); // roomy budget: any prefix of the language
        expect(rows[1]).toEqual(["n", "yes", "no", "ye"]); // left 0 < dist 2: each token must gain a byte
        expect(rows[2]).toEqual(["n", "yes", "no", "ye"]); // left 1: room for dist ≤ 1 after it
        expect(rows[3]).toEqual(["y", "n", "yes", "no", "ye"]); // left 3: "y" (dist 2) fits again
        expect(rows[4]).toEqual(["<eos>"]); // accepting, no way on: only EOS
        expect(rows[5]).toEqual(["<eos>"]);
        expect(rows[6]).toEqual(["o"]); // after "n", last token: must accept
        expect(rows[7]).toEqual(["s"]);
      }),
    );

    test(
      "advance: walks the sampled token; EOS, dead walks, rows that did not sample and inactive slots stay",
      on(path, async (gpu) => {
        for (const [k, V] of [1000, 4099].entries()) {
          await expectCase(gpu, grammarAdvanceCase, { V, L: 9 + k, states: 50 }, 3 + k);
        }
        // By hand on (yes|no): sampled "ye" from 0 → 2, "s" from 2 → 3, EOS from 3 stays, "o" from 0 (dead)
        // stays, a row whose sampler did not run stays, an inactive slot stays.
        const i = yesNoInputs([[0, 5], [2, 5], [3, 5], [0, 5], [0, 5], [0, 5]]);
        [8, 3, EOS, 5, 6, 6].forEach((tok, s) => (i.hist[s * i.ctx + i.rows[s].pos + 1] = tok));
        i.slots[4].pos = i.rows[4].pos;
        i.gstate[5].active = 0;
        const got = (await run(gpu, grammarAdvanceCase, i)).gstate;
        expect([0, 1, 2, 3, 4, 5].map((s) => got[4 * s + 1])).toEqual([2, 3, 3, 0, 0, 0]);
        expect([0, 1, 2, 3, 4, 5].map((s) => got[4 * s])).toEqual([1, 1, 1, 1, 1, 0]);
      }),
    );

    test(
      "sampling masked rows: top-k / top-p / min-p draws stay among allowed ids and match the reference",
      on(path, async (gpu) => {
        const V = 1031, L = 24;
        const rng = new Rng(41);
        const logits = Float64Array.from({ length: L * V }, () => Math.fround(rng.signed(4)));
        const allowedIds: Set<number>[] = [];
        for (let l = 0; l < L; l++) {
          // 40 allowed ids per row, the rest masked.
          const ok = new Set(rng.permutation(V).slice(0, 40));
          allowedIds.push(ok);
          for (let t = 0; t < V; t++) if (!ok.has(t)) logits[l * V + t] = MASKED;
        }
        const mixes = [
          { temperature: 0.7, topK: 20, topP: 0.8, minP: 0 },
          { temperature: 1.0, topK: 5, topP: 1, minP: 0 },
          { temperature: 1.3, topK: 0, topP: 0.5, minP: 0 },
          { temperature: 0.9, topK: 0, topP: 1, minP: 0.2 },
        ];
        const rows = Array.from({ length: L }, (_, r) => ({ token: 1, pos: 3 + (r % 7), slot: r, kind: 1 }));
        const i: SampleInputs = {
          shape: {},
          act: "f32",
          V,
          ctx: 16,
          logits,
          lrows: rows.map((_, r) => r),
          rows,
          params: rows.map((_, s) => ({ ...mixes[s % mixes.length], seed: 900 + s })),
          slots: rows.map((r) => ({ pos: r.pos, limit: 15, done: 0 })),
          hist: Uint32Array.from({ length: L * 16 }, (_, k) => 1 + (k % 5)),
          eos: [],
        };
        const b = await bindSample(gpu, i);
        try {
          runOnce(b);
          const got = await b.read();
          for (const r of checkSample(got, i)) expect(r.ok, describeReport(r)).toBe(true);
          const picks = picksOf(got, i);
          picks.forEach((p, l) => expect(allowedIds[l].has(p), `row ${l} picked ${p}`).toBe(true));
          expect(new Set(picks).size).toBeGreaterThan(L / 2);
        } finally {
          b.destroy();
        }
      }),
    );
  });
}

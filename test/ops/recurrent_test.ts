/**
 * causal_conv.wgsl, gated_delta.wgsl and the chunked gated delta rule (gated_delta_chunk_{wy,state,out}.wgsl)
 * through src/ops/recurrent.ts against src/lab/ref/recurrent.ts. A step holds D decode units (one continuing
 * a sequence from a random state, one at pos 0), a segment continuing from a random state (at a random
 * position: mostly mid-chunk) and one starting at pos 0; every slot starts random (a new sequence must
 * ignore its slot) and the whole state pool is compared, a slot no unit owns included.
 * Tolerance, both paths (inputs are exact in act, the arithmetic is f32 on both):
 *   causalConv  y |d| ≤ 1e-6 + 2e-6·|ref|;  state (stored inputs) |d| ≤ 1.2e-7·|ref| (f32 rounding of x·B)
 *   gatedDelta  out |d| ≤ 2e-5 + 1e-4·|ref|;  state |d| ≤ 2e-6 + 2e-5·|ref|, recurrent and chunked alike
 * Chunking, bitwise: the recurrent kernels give the one-segment outputs and state when the continuing
 * segment is split 5 + 1 + rest in successive dispatches, or two sequences are decoded token by token as
 * the decode rows of successive steps; the chunked form gives them when the segment is cut at every
 * multiple of the chunk length (and within tolerance when cut 5 + 1 + rest).
 */
import { describe, expect, test } from "vitest";
import type { Gpu } from "../../src/gpu/device.ts";
import type { CaseInputs, KernelCase, Shape } from "../../src/lab/case.ts";
import { causalConvCase, gatedDeltaCase, gatedDeltaChunkCase } from "../../src/lab/cases/recurrent.ts";
import { BufferSet, readF32, runOnce, seal, withShader } from "../../src/lab/harness.ts";
import { encodeAct } from "../../src/lab/ref/half.ts";
import { encodeRows, type Row } from "../../src/lab/ref/paged.ts";
import { Rng } from "../../src/lab/rng.ts";
import { runCase } from "../../src/lab/run.ts";
import { causalConv, gatedDelta } from "../../src/ops/recurrent.ts";
import type { OpContext } from "../../src/ops/context.ts";
import { shaderSource } from "../../src/platform/mod.ts";
import { devices, expectBitwise, expectCase, outputsOf } from "../util/lab.ts";

const { on } = devices();

const LFM2 = { C: 130, KC: 3, gated: 1, fn: "none" };
const ODD_HEADS = { nk: 3, nv: 3, dk: 12, dv: 20 };

/**
 * Runs a case's two segments (D = 0, S = S0 = L: rows 0..L−1 continue sequence A, rows L..2L−1 start B)
 * as L steps whose decode rows are (A_t, B_t). `perRow`: the row-major inputs, their row width and whether
 * they are act (else f32); `shared`: the f32 inputs every step binds; `rec` records the op
 * for one step over those buffers plus rows, state and the step's output.
 */
async function decodeSteps(
  gpu: Gpu,
  i: CaseInputs & { rows: Row[]; state0: Float64Array },
  L: number,
  io: {
    perRow: Record<string, readonly [Float64Array, number, boolean]>;
    shared: Record<string, Float64Array>;
    out: readonly [string, number];
  },
  rec: (ctx: OpContext, b: Record<string, GPUBuffer>) => Promise<void>,
): Promise<{ out: Float64Array; state: Float64Array }> {
  const { perRow, out } = io;
  const set = new BufferSet(gpu);
  const state = set.upload("state", Float32Array.from(i.state0));
  const shared = Object.fromEntries(
    Object.entries(io.shared).map(([k, v]) => [k, set.upload(k, Float32Array.from(v))]),
  );
  const ctx = set.context();
  const outs: GPUBuffer[] = [];
  for (let t = 0; t < L; t++) {
    const pick = [t, L + t];
    const rows = set.upload("rows", encodeRows(pick.map((r) => i.rows[r])));
    const b: Record<string, GPUBuffer> = { ...shared, state, rows };
    for (const [name, [data, w, act]] of Object.entries(perRow)) {
      const v = pick.flatMap((r) => [...data.subarray(r * w, (r + 1) * w)]);
      b[name] = set.upload(name, act ? encodeAct(v, i.act) : Float32Array.from(v));
    }
    b[out[0]] = set.scratch(out[0], 2 * out[1] * 4);
    outs.push(b[out[0]]);
    await rec(ctx, b);
  }
  const bound = seal(set, ctx, { maxKvLen: 1 }, () => Promise.resolve({}));
  try {
    runOnce(bound);
    const res = new Float64Array(2 * L * out[1]);
    for (let t = 0; t < L; t++) {
      const o = await readF32(gpu, outs[t], 2 * out[1]);
      res.set(o.subarray(0, out[1]), t * out[1]);
      res.set(o.subarray(out[1]), (L + t) * out[1]);
    }
    return { out: res, state: await readF32(gpu, state, i.state0.length) };
  } finally {
    bound.destroy();
  }
}

const units = { decode: 2, segments: [] };

for (const path of ["f16", "f32"] as const) {
  describe(`causal conv, ${path} activations`, () => {
    test(
      "Qwen3-Next form (silu, no gates), KC 4, C 37, x at column 3",
      on(path, async (gpu) => {
        for (const seed of [1, 2]) await expectCase(gpu, causalConvCase, {}, seed);
      }),
    );
    test(
      "LFM2 form (src = [B | C | x], u = B·x, y = C·conv(u), no activation), KC 3, C 130",
      on(path, async (gpu) => {
        for (const seed of [3, 4]) await expectCase(gpu, causalConvCase, LFM2, seed);
      }),
    );
    test(
      "KC 2 and 8, one channel, 5 decode units, a 70-row segment (8 lanes per channel), a 1-row one",
      on(path, async (gpu) => {
        await expectCase(gpu, causalConvCase, { C: 1, KC: 8, fn: "none", D: 5, S: 3, S0: 2 }, 5);
        await expectCase(gpu, causalConvCase, { C: 300, KC: 2, D: 0, S: 70, S0: 1 }, 6);
      }),
    );
    test(
      "chunked prefill (5 + 1 + rest) and token-by-token decode equal one segment, bitwise",
      on(path, async (gpu) => {
        for (const shape of [{}, LFM2]) {
          const whole = await outputsOf(gpu, causalConvCase, { ...shape, split: 0 }, 7);
          const split = await outputsOf(gpu, causalConvCase, { ...shape, split: 1 }, 7);
          expectBitwise(split.y, whole.y, "split y");
          expectBitwise(split.state, whole.state, "split state");

          const s = { ...causalConvCase.small, ...shape, D: 0, S: 11, S0: 11 };
          const i = causalConvCase.make(s, new Rng(8), { act: path, maxBinding: gpu.info.maxBinding });
          const seg = await outputsOf(gpu, causalConvCase, s, 8);
          expect(causalConvCase.check(seg, i).every((o) => o.ok), "one segment").toBe(true);
          const io = {
            perRow: { src: [i.src, i.lds, true] },
            shared: { weight: i.weight },
            out: ["y", i.C],
          } as const;
          const dec = await decodeSteps(gpu, i, 11, io, async (ctx, b) => {
            const { lds, C, KC, cols } = i;
            const { src, weight, state, y, rows } = b;
            await causalConv(ctx, { src, lds, C, KC, cols, weight, state, y, act: i.fn, rows, units });
          });
          expectBitwise(dec.out, seg.y, "decode y");
          expectBitwise(dec.state, seg.state, "decode state");
        }
      }),
    );
  });

  describe(`gated delta rule, ${path} activations`, () => {
    test(
      "nk 2, nv 4 (GQA 2), dk = dv = 16",
      on(path, async (gpu) => {
        for (const seed of [1, 2]) await expectCase(gpu, gatedDeltaCase, {}, seed);
      }),
    );
    test(
      "nk = nv = 3, dk 12, dv 20 (neither a power of two)",
      on(path, async (gpu) => {
        for (const seed of [3, 4]) await expectCase(gpu, gatedDeltaCase, ODD_HEADS, seed);
      }),
    );
    test(
      "real head dims dk = dv = 128 (2 lanes per column), 3 decode units, a 40-row segment",
      on(path, async (gpu) => {
        await expectCase(gpu, gatedDeltaCase, { nk: 1, nv: 2, dk: 128, dv: 128, D: 3, S: 40, S0: 5 }, 5);
      }),
    );
    test(
      "chunked prefill (5 + 1 + rest) and token-by-token decode equal one segment, bitwise",
      on(path, async (gpu) => {
        for (const shape of [{}, ODD_HEADS]) {
          const whole = await outputsOf(gpu, gatedDeltaCase, { ...shape, split: 0 }, 7);
          const split = await outputsOf(gpu, gatedDeltaCase, { ...shape, split: 1 }, 7);
          expectBitwise(split.out, whole.out, "split out");
          expectBitwise(split.state, whole.state, "split state");

          const s = { ...gatedDeltaCase.small, ...shape, D: 0, S: 9, S0: 9 };
          const i = gatedDeltaCase.make(s, new Rng(8), { act: path, maxBinding: gpu.info.maxBinding });
          const seg = await outputsOf(gpu, gatedDeltaCase, s, 8);
          expect(gatedDeltaCase.check(seg, i).every((o) => o.ok), "one segment").toBe(true);
          const width = 2 * i.nk * i.dk + i.nv * i.dv;
          const io = {
            perRow: { conv: [i.conv, width, false], src: [i.src, i.lds, true] },
            shared: { aLog: i.aLog, dtBias: i.dtBias, norm: i.norm },
            out: ["out", i.nv * i.dv],
          } as const;
          const dec = await decodeSteps(gpu, i, 9, io, async (ctx, b) => {
            const { lds, zOff, bOff, aOff, eps, nk, nv, dk, dv } = i;
            const { conv, src, aLog, dtBias, norm, state, out, rows } = b;
            const shape = { lds, zOff, bOff, aOff, eps, nk, nv, dk, dv };
            await gatedDelta(ctx, { ...shape, conv, src, aLog, dtBias, norm, state, out, rows, units });
          });
          expectBitwise(dec.out, seg.out, "decode out");
          expectBitwise(dec.state, seg.state, "decode state");
        }
      }),
    );
  });
}

const CHUNKED = gatedDeltaChunkCase;

/**
 * expectCase on the chunked form, first asserting where its continuing segment starts: mid-chunk, or (`mid`
 * false) exactly at a chunk's start, from a nonzero state either way.
 */
async function expectMidChunk(gpu: Gpu, shape: Shape, seed: number, mid = true): Promise<void> {
  const s = { ...CHUNKED.small, ...shape };
  const i = CHUNKED.make(s, new Rng(seed), { act: "f32", maxBinding: gpu.info.maxBinding });
  const p0 = i.rows[i.units.segments[0].row0].pos;
  expect(p0 % i.chunk !== 0, `seed ${seed}: the segment starts at pos ${p0}`).toBe(mid);
  await expectCase(gpu, CHUNKED, shape, seed);
}

for (const path of ["f16", "f32"] as const) {
  describe(`gated delta rule, chunked form, ${path} activations`, () => {
    test(
      "chunks of 16, 32, 64: decode units, a segment from a random state (mid-chunk, or at a chunk's " +
        "start), one from pos 0",
      on(path, async (gpu) => {
        await expectMidChunk(gpu, {}, 1);
        await expectMidChunk(gpu, {}, 2, false);
        await expectMidChunk(gpu, { chunk: 32, S: 70, S0: 33 }, 3);
        await expectMidChunk(gpu, { chunk: 64, S: 150, S0: 70 }, 4);
        // One-row segments: a chunk holding a single slot.
        await expectCase(gpu, CHUNKED, { chunk: 64, D: 0, S: 1, S0: 1 }, 5);
      }),
    );
    test(
      "odd heads and dims: nk = nv = 3, dk 12, dv 20; GQA 5, dk 13, dv 9; dk 7, dv 200",
      on(path, async (gpu) => {
        await expectMidChunk(gpu, ODD_HEADS, 6);
        await expectMidChunk(gpu, { nk: 1, nv: 5, dk: 13, dv: 9, chunk: 32, S: 77 }, 7);
        await expectMidChunk(gpu, { nk: 1, nv: 1, dk: 7, dv: 200, S: 40 }, 8);
      }),
    );
    test(
      "real head dims dk = dv = 128 and 256, chunks of 64, decode units beside",
      on(path, async (gpu) => {
        await expectMidChunk(gpu, { nk: 1, nv: 2, dk: 128, dv: 128, chunk: 64, D: 3, S: 140, S0: 5 }, 9);
        await expectMidChunk(gpu, { nk: 1, nv: 1, dk: 256, dv: 256, chunk: 64, D: 1, S: 70, S0: 3 }, 10);
      }),
    );
    test(
      "a prefill cut at every multiple of the chunk is one pass bitwise; cut 5 + 1 + rest, within tolerance",
      on(path, async (gpu) => {
        const shapes: Shape[] = [{}, { ...ODD_HEADS, chunk: 32, S: 90 }, { chunk: 64, S: 150 }];
        for (const shape of shapes) {
          const s = { ...CHUNKED.small, ...shape, split: 2 };
          const i = CHUNKED.make(s, new Rng(11), { act: path, maxBinding: gpu.info.maxBinding });
          expect(i.units.segments.length, "cuts in the segment").toBeGreaterThan(2);
          const whole = await outputsOf(gpu, CHUNKED, { ...shape, split: 0 }, 11);
          const cut = await outputsOf(gpu, CHUNKED, s, 11);
          expect(CHUNKED.check(whole, i).every((o) => o.ok), "one pass").toBe(true);
          expectBitwise(cut.out, whole.out, "cut out");
          expectBitwise(cut.state, whole.state, "cut state");
          await expectCase(gpu, CHUNKED, { ...shape, split: 1 }, 11);
        }
      }),
    );
  });
}

describe("wrong edits are caught", () => {
  const WY = "gated_delta_chunk_wy.wgsl", STATE = "gated_delta_chunk_state.wgsl";
  const OUT = "gated_delta_chunk_out.wgsl";
  test(
    "a new sequence reading its slot (conv, delta, chunked), a dropped decay, a dropped norm rsqrt; " +
      "chunked: T = I − A only, no decay mask in A, no diagonal in P, no decay of q·S₀",
    on("f32", async (gpu) => {
      const edits: [KernelCase, string, string, string][] = [
        [causalConvCase, "causal_conv.wgsl", "if (fresh) { return 0.0; }", ""],
        [gatedDeltaCase, "gated_delta.wgsl", "if (head.pos != 0u) {", "if (true) {"],
        [gatedDeltaCase, "gated_delta.wgsl", "s[m] = s[m] * decay;", ""],
        [gatedDeltaCase, "gated_delta.wgsl", "out[base + j] * inv * norm[j]", "out[base + j] * norm[j]"],
        [CHUNKED, WY, "tm[j * C + i] = fma(-tm[i * C + m], tm[j * C + m], tm[j * C + i]);", ""],
        [CHUNKED, WY, "bt[i] * tm[i * C + j]", "bt[i]"],
        [CHUNKED, STATE, "if (head.pos != 0u) {", "if (true) {"],
        [CHUNKED, STATE, "var x = s[m] * decay;", "var x = s[m];"],
        [CHUNKED, OUT, "if (j <= i) {", "if (j < i) {"],
        [CHUNKED, OUT, "x = eg[t] * rq[t] *", "x = rq[t] *"],
      ];
      for (const [c, file, from, to] of edits) {
        const text = await shaderSource(file);
        expect(text.includes(from), `${file} no longer contains "${from}"`).toBe(true);
        const bad = await withShader(
          gpu,
          file,
          text.replace(from, to),
          () => runCase(gpu, c, { shape: c.small }),
        );
        expect(bad.ok, `${file}: edit of "${from}" was not caught`).toBe(false);
      }
      for (const c of [causalConvCase, gatedDeltaCase, CHUNKED]) {
        expect((await runCase(gpu, c, { shape: c.small })).ok).toBe(true);
      }
    }),
  );
  test(
    "chunks aligned to the segment's start instead of absolute positions: still right, but a cut at a " +
      "multiple of the chunk is no longer bitwise one pass",
    on("f32", async (gpu) => {
      const edits = [
        [WY, "let off = rows[row0].pos % C;"],
        [STATE, "let off = head.pos % C;"],
        [OUT, "let off = rows[row0].pos % C;"],
      ];
      const run = async (k: number): Promise<void> => {
        if (k === edits.length) {
          const i = CHUNKED.make({ ...CHUNKED.small, split: 0 }, new Rng(12), {
            act: "f32",
            maxBinding: 2 ** 27,
          });
          const whole = await outputsOf(gpu, CHUNKED, { split: 0 }, 12);
          const cut = await outputsOf(gpu, CHUNKED, { split: 2 }, 12);
          expect(CHUNKED.check(whole, i).every((o) => o.ok), "one pass, segment-aligned").toBe(true);
          expect(cut.out.some((v, e) => !Object.is(v, whole.out[e])), "cut out differs").toBe(true);
          return;
        }
        const [file, from] = edits[k];
        const text = await shaderSource(file);
        expect(text.includes(from), `${file} no longer contains "${from}"`).toBe(true);
        // "· 0" rather than 0: the kernel must still use `rows` (its bind group layout is derived).
        await withShader(gpu, file, text.replace(from, from.replace("% C", "* 0u")), () => run(k + 1));
      };
      await run(0);
    }),
  );
});

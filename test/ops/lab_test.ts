/**
 * The kernel lab itself: every kernel in wgsl/ has a case; inputs are never zero; an edited shader is
 * checked through the same path (and a wrong edit is caught, so the kernel tests can fail); the comparison
 * rules; the float64 references on hand-worked values; the probes; `deno task kernel`.
 */
import { describe, expect, test } from "vitest";
import { DeviceError } from "../../src/errors.ts";
import { packAffine } from "../../src/loader/quantize.ts";
import { resolveShape } from "../../src/lab/case.ts";
import { caseFor, CASES, labKernels } from "../../src/lab/cases.ts";
import { compare, EXACT } from "../../src/lab/compare.ts";
import { withShader } from "../../src/lab/harness.ts";
import { probeMatmul, probeRead } from "../../src/lab/probes.ts";
import { attentionRef } from "../../src/lab/ref/attention.ts";
import { streamValue } from "../../src/lab/ref/quant.ts";
import { ropeInvFreq, ropeRef } from "../../src/lab/ref/rope.ts";
import { drawU, pcg, sampleRow, threshold } from "../../src/lab/ref/sample.ts";
import { Rng } from "../../src/lab/rng.ts";
import { runCase } from "../../src/lab/run.ts";
import { shaderSource } from "../../src/platform/mod.ts";
import { ROOT } from "../util/fixtures.ts";
import { devices } from "../util/lab.ts";

const { on } = devices();

describe("registry", () => {
  test("every kernel in wgsl/ (not lib/, not the probes) has a case, and nothing else does", () => {
    const files = [...Deno.readDirSync(`${ROOT}wgsl`)]
      .filter((e) => e.isFile && e.name.endsWith(".wgsl") && !e.name.startsWith("probe_"))
      .map((e) => e.name).sort();
    expect(labKernels().sort()).toEqual(files);
    expect(caseFor("wgsl/attention_combine.wgsl")).toBe(caseFor("attention_decode"));
  });

  test(
    "every case: shapes resolve, costs are finite, tolerances cover both dtypes, " +
      "inputs hold no zeros",
    () => {
      for (const c of CASES) {
        for (const shape of [c.defaults, c.small]) {
          const s = resolveShape(c, shape);
          for (const act of ["f16", "f32"] as const) {
            const cost = c.cost(s, act);
            expect(Number.isFinite(cost.bytes) && cost.bytes > 0, c.files[0]).toBe(true);
            expect(Number.isFinite(cost.flops) && cost.flops >= 0, c.files[0]).toBe(true);
            for (const t of Object.values(c.tolerance(s, act))) {
              expect(t.atol >= 0 && t.rtol >= 0, c.files[0]).toBe(true);
            }
          }
        }
        for (const act of ["f16", "f32"] as const) {
          const inputs = c.make(resolveShape(c, c.small), new Rng(3), { act, maxBinding: 2 ** 27 });
          for (const [k, v] of Object.entries(inputs)) {
            if (v instanceof Float64Array) {
              expect(v.indexOf(0), `${c.files[0]} input ${k} has a zero`).toBe(-1);
            }
          }
        }
      }
      expect(() => resolveShape(caseFor("matmul_vec"), { Q: 3 })).toThrow(/unknown shape key "Q"/);
      expect(() => resolveShape(caseFor("matmul_vec"), { M: "x" })).toThrow(/needs a number/);
    },
  );
});

describe("edited shaders run through the same check", () => {
  test(
    "a wrong edit fails its check, and the shipped shader passes again afterwards",
    on("f32", async (gpu) => {
      const edits: [string, string, string, Record<string, number | string>][] = [
        // Off-by-one in the mean: 1/(2H) relative, well above tolerance at H = 63.
        ["rms_norm", "total / f32(H)", "total / f32(H - 1u)", { H: 63 }],
        // One k of each 32 dropped in the tiled matmul.
        ["matmul_tiled", "kk < BK; kk++", "kk < BK - 1u; kk++", {}],
        // The int8 prefill kernel: the bias term of each 32-value chunk dropped.
        ["matmul_tiled_x8", "fma(vec4<f32>(sb.y), x4.sum, acc)", "acc", {}],
        // Softmax over the splits off by a small factor.
        ["attention_combine", "o / l;", "o / (l * 1.001);", {}],
      ];
      for (const [name, from, to, shape] of edits) {
        const c = caseFor(name);
        const file = `${name}.wgsl`;
        const text = await shaderSource(file);
        expect(text.includes(from), `${file} no longer contains "${from}"`).toBe(true);
        const bad = await withShader(
          gpu,
          file,
          text.replace(from, to),
          () => runCase(gpu, c, { shape: { ...c.small, ...shape } }),
        );
        expect(bad.ok, `${file} edit "${to}" was not caught`).toBe(false);
        expect(bad.outputs.some((o) => o.failures.length > 0)).toBe(true);
        const good = await runCase(gpu, c, { shape: { ...c.small, ...shape } });
        expect(good.ok, `${file} after restore`).toBe(true);
      }
    }),
  );

  test(
    "a shader that does not compile is a DeviceError",
    on("f32", async (gpu) => {
      const c = caseFor("silu_mul");
      const text = await shaderSource("silu_mul.wgsl");
      await expect(
        withShader(
          gpu,
          "silu_mul.wgsl",
          text.replace("silu(g) * u", "silu(g) * nope"),
          () => runCase(gpu, c, { shape: c.small }),
        ),
      )
        .rejects.toBeInstanceOf(DeviceError);
      expect((await runCase(gpu, c, { shape: c.small })).ok).toBe(true);
      gpu.takeErrors();
    }),
  );
});

describe("compare", () => {
  test("|d| ≤ atol + rtol·|ref|; NaN from the kernel fails; NaN in the reference is not checked", () => {
    const tol = { atol: 0.1, rtol: 0.1 };
    expect(compare("a", [1.19, -2.3], [1, -2], tol).ok).toBe(true);
    const r = compare("a", [1.21, NaN, 5, 7], [1, 1, NaN, 7], tol);
    expect([r.ok, r.checked, r.failed]).toEqual([false, 3, 2]);
    expect(r.failures.map((f) => f.index)).toEqual([0, 1]);
    expect(r.worst!.index).toBe(1);
    expect(compare("a", [1], [1, 2], EXACT).ok).toBe(false);
    expect(compare("a", [0, -0], [0, 0], EXACT).ok).toBe(true);
  });
});

describe("references on hand-worked values", () => {
  test("bit-stream decoding agrees with the loader's packer for every width", () => {
    for (const bits of [2, 3, 4, 5, 6, 8]) {
      const q = Uint8Array.from({ length: 64 }, (_, i) => (i * 7 + 3) % (1 << bits));
      const words = packAffine(q, 2, 32, bits);
      for (let i = 0; i < 64; i++) expect(streamValue(words, 0, i, bits)).toBe(q[i]);
    }
  });

  test("attention: one key gives its value; two equal scores give the mean; GQA maps heads", () => {
    // Pool of 1 page, ps 2, 1 kv head, hd 2: K = [[1, 0], [1, 0]], V = [[2, 4], [6, 8]].
    const kv = new Float64Array([1, 0, 1, 0, 2, 4, 6, 8]);
    const base = { pages: new Uint32Array([0]), maxPages: 1, nkv: 1, ps: 2, hd: 2, nq: 2, scale: 1, kv };
    const rows = [{ token: 0, pos: 0, slot: 0, kind: 1 }, { token: 0, pos: 1, slot: 0, kind: 1 }];
    const out = attentionRef({
      ...base,
      rows,
      which: [0, 1],
      q: new Float64Array([3, 1, 0, 1, 5, 5, 0, 2]),
      out0: new Float64Array(8),
    });
    expect([...out]).toEqual([2, 4, 2, 4, 4, 6, 4, 6]);
  });

  test("rope: position 0 scales the rotated dims by mscale; position p rotates pair (i, i + rot/2)", () => {
    const kv0 = new Float64Array(2 * 2 * 4);
    const common = {
      pages: new Uint32Array([0]),
      maxPages: 1,
      nkv: 1,
      ps: 2,
      hd: 4,
      nq: 1,
      rot: 2,
      eps: 0,
      mscale: 2,
      kv0,
    };
    const qkv = new Float64Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    const at = (pos: number) =>
      ropeRef({
        ...common,
        rows: [{ token: 0, pos, slot: 0, kind: 0 }],
        qkv,
        invFreq: new Float64Array([0.5]),
      });
    // dims past rot pass through unscaled (HF: mscale rides on cos/sin)
    expect([...at(0).q]).toEqual([2, 4, 3, 4]);
    const th = Math.fround(3 * 0.5);
    const q3 = at(3).q;
    expect(q3[0]).toBeCloseTo(2 * (Math.cos(th) - 2 * Math.sin(th)), 12);
    expect(q3[1]).toBeCloseTo(2 * (2 * Math.cos(th) + Math.sin(th)), 12);
    expect([q3[2], q3[3]]).toEqual([3, 4]);
    const kv = at(1).kv; // K at token 1 of page 0, V after K
    expect([...kv.subarray(4, 8)].slice(2)).toEqual([7, 8]);
    expect([...kv.subarray(12, 16)]).toEqual([9, 10, 11, 12]);
    expect(ropeInvFreq(10000, 4)[1]).toBeCloseTo(0.01, 9);
  });

  test("sampling thresholds: top-k keeps ties, top-p the smallest set, min-p relative to the max", () => {
    const z = new Float64Array([1, 3, 2, 3, 0]);
    const p = { temperature: 1, topK: 0, topP: 1, minP: 0, seed: 0 };
    expect(threshold(z, { ...p, topK: 2 })).toBe(3); // both 3s
    expect(threshold(z, { ...p, topK: 3 })).toBe(2);
    // Masses e^(z−3): the two 3s hold 2 of 2.553; 0.5 of it is reached by them, 0.8 needs the 2 as well.
    expect(threshold(z, { ...p, topP: 0.5 })).toBe(3);
    expect(threshold(z, { ...p, topP: 0.8 })).toBe(2);
    expect(threshold(z, { ...p, topK: 3, topP: 0.9 })).toBe(2);
    expect(threshold(z, { ...p, minP: 0.3 })).toBeCloseTo(3 + Math.log(0.3), 12);
    const d = sampleRow(z, { ...p, topK: 2, seed: 9 }, 4, 1);
    expect(d.support).toEqual([1, 3]);
    expect(d.support).toContain(d.id);
    expect(sampleRow(z, { ...p, temperature: 0 }, 0, 0).id).toBe(1); // greedy: lowest id of the tie
  });

  test("the counter hash matches a BigInt transcription of the kernel's u32 arithmetic", () => {
    const M = 2n ** 32n;
    const ref = (v: number) => {
      const s = (BigInt(v) * 747796405n + 2891336453n) % M;
      const w = (((s >> ((s >> 28n) + 4n)) ^ s) * 277803737n) % M;
      return Number((w >> 22n) ^ w);
    };
    const rng = new Rng(1);
    for (let k = 0; k < 200; k++) {
      const v = k < 3 ? [0, 1, 0xffffffff][k] : rng.u32();
      expect(pcg(v)).toBe(ref(v));
    }
    const u = drawU(1234, 77, 3);
    expect(u > 0 && u < 1).toBe(true);
  });
});

describe("probes", () => {
  test(
    "the f32 matmul probe computes C = A·B, and both probes report positive rates",
    on("f32", async (gpu) => {
      const mm = await probeMatmul(gpu, { half: false, n: 128, iters: 1, verify: true });
      expect(mm.maxRelErr!).toBeLessThan(1e-5);
      const read = await probeRead(gpu, { bytes: 8 * 2 ** 20, iters: 2 });
      for (const v of [mm.gflops, read.gbs]) expect(Number.isFinite(v) && v > 0).toBe(true);
      expect(gpu.takeErrors()).toEqual([]);
    }),
  );
  test(
    "the int8 matmul probe computes C = A·Bᵀ exactly (dot4I8Packed, i32)",
    on("f32", async (gpu) => {
      const mm = await probeMatmul(gpu, { half: false, int8: true, n: 192, iters: 1, verify: true });
      expect(mm.maxRelErr).toBe(0); // the fraction of entries that differ from the integer product
      expect(Number.isFinite(mm.gflops) && mm.gflops > 0).toBe(true);
      expect(gpu.takeErrors()).toEqual([]);
    }),
  );
  test(
    "the f16 matmul probe computes C = A·B in f16",
    on("f16", async (gpu) => {
      const mm = await probeMatmul(gpu, { half: true, n: 128, iters: 1, verify: true });
      expect(mm.maxRelErr!).toBeLessThan(2e-2); // f16 products and sums over 128 terms
      expect(Number.isFinite(mm.gflops) && mm.gflops > 0).toBe(true);
      expect(gpu.takeErrors()).toEqual([]);
    }),
  );
});

describe("deno task kernel", () => {
  async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
    const r = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${ROOT}src/cli/kernel.ts`, ...args],
      env: { XDG_RUNTIME_DIR: "/tmp" },
    }).output();
    return { code: r.code, out: new TextDecoder().decode(r.stdout), err: new TextDecoder().decode(r.stderr) };
  }

  test("checks and times a kernel (--json, --wall), and reports bad input with a clear error", async () => {
    const tasks = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`)).tasks;
    expect(tasks.kernel).toBe("deno run -A src/cli/kernel.ts");
    const ok = await cli([
      "wgsl/matmul_vec.wgsl",
      "--shape",
      "M=3,N=37,K=224,w=q3g32",
      "--iters",
      "2",
      "--no-probe",
      "--json",
    ]);
    expect(ok.code, ok.err).toBe(0);
    const r = JSON.parse(ok.out);
    expect([r.ok, r.shape.M, r.shape.w, r.outputs[0].checked]).toEqual([true, 3, "q3g32", 3 * 37]);
    expect(r.timing.medianMs).toBeGreaterThan(0);
    // --wall times by the wall clock even where the adapter has timestamp queries.
    const wall = await cli([
      "wgsl/rms_norm.wgsl",
      "--small",
      "--iters",
      "2",
      "--no-probe",
      "--wall",
      "--json",
    ]);
    expect(wall.code, wall.err).toBe(0);
    expect(JSON.parse(wall.out).timing.method).toBe("wall");
    // Plain text with the measured ceilings (the probes run once per device).
    const text = await cli(["wgsl/rms_norm.wgsl", "--small", "--f32", "--iters", "2"]);
    expect(text.code, text.err).toBe(0);
    expect(text.out).toMatch(/activations f32/);
    expect(text.out).toMatch(/y: ok/);
    expect(text.out).toMatch(/memory .* GB\/s = .*% of .* \(streaming read\)/);
    expect(text.out).toMatch(
      /ceiling +read [0-9.]+ GB\/s \(workgroup (256|512)\), matmul f32 [0-9.]+ GFLOP\/s/,
    );
    const bad = await cli(["wgsl/matmul_vec.wgsl", "--shape", "w=q7g64", "--iters", "0"]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/q7g64/);
    const none = await cli(["wgsl/nope.wgsl"]);
    expect(none.err).toMatch(/no lab case for wgsl\/nope.wgsl/);
  });
});

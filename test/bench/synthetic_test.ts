/**
 * Synthetic benchmark weights: a tiny qwen3 shape loads through `Engine.load` and generates (a tiny MoE one
 * with its 4-bit router on int8 x or not, as the profile says); the weights
 * read back have the intended statistics; row shards continue one random stream; and
 * `bench.ts --synthetic tiny --quick` runs end to end (JSON, table, SVG), with a missing torch reported.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { readBuffer } from "../../src/gpu/readback.ts";
import { scaleRange, SyntheticModelSource, SyntheticWeights } from "../../src/loader/synthetic.ts";
import type { DecoderWeights } from "../../src/models/llama.ts";
import type { ArchConfig } from "../../src/models/model.ts";
import type { Linear } from "../../src/ops/linear.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { runTorchBaseline } from "../../bench/baseline.ts";
import { atDepth } from "../../bench/report.ts";
import { BARS } from "../../bench/roofline.ts";
import { DEFAULT_MODEL, ROOT } from "../util/fixtures.ts";

const bf16 = (h: number) => new Float32Array(new Uint32Array([h << 16]).buffer)[0];

async function readShard(gpu: Gpu, w: Linear, i = 0) {
  const s = w.shards[i];
  const groups = w.K / 64;
  const words = new Uint32Array(await readBuffer(gpu, s.w, 0, (s.n * w.K) / 2));
  const sc = new Uint16Array(await readBuffer(gpu, s.scales!, 0, s.n * groups * 2));
  const bi = new Uint16Array(await readBuffer(gpu, s.biases!, 0, s.n * groups * 2));
  return { words, sc, bi, groups, n: s.n };
}

let engine: Engine;
beforeAll(async () => {
  const src = new SyntheticModelSource("tiny", new DiskModelSource(DEFAULT_MODEL));
  engine = await Engine.load(src, {
    weightSource: src.weightSource({ seed: 7 }),
    maxBatch: 1,
    contextWindow: 128,
  });
});
afterAll(() => engine?.destroy());

describe("synthetic weights", () => {
  test("a tiny qwen3 shape loads through Engine.load and generates", async () => {
    expect(engine.info.name).toBe("tiny");
    expect(engine.info.quantization).toBe("affine 4-bit g64");
    expect(engine.config.dims).toMatchObject({
      hidden: 128,
      layers: 2,
      nq: 4,
      nkv: 2,
      hd: 32,
      intermediate: 256,
      vocab: 16384,
    });
    expect(engine.eosIds).toEqual([]);
    const sched = new Scheduler(engine);
    const r = await sched.submit({ prompt: [11, 2222, 333, 4444], maxTokens: 6 }).result;
    await sched.close();
    expect(r.error).toBeUndefined();
    expect(r.completionTokens).toBe(6);
    for (const t of r.tokenIds) expect(t >= 0 && t < 16384).toBe(true);
    const logits = await engine.forwardLogits([5, 6, 7]);
    expect(logits.every(Number.isFinite)).toBe(true);
    expect(Math.max(...logits) - Math.min(...logits)).toBeGreaterThan(0.1);
    expect(engine.gpu.takeErrors()).toEqual([]);
  });

  test("tiny-moe: a 4-bit router's decode rows on int8 x under moe.routerInt8X, f32 x without", async () => {
    const src = new SyntheticModelSource("tiny-moe", new DiskModelSource(DEFAULT_MODEL));
    for (const routerInt8X of [true, false]) {
      const e = await Engine.load(src, {
        weightSource: src.weightSource({ seed: 3 }),
        maxBatch: 1,
        contextWindow: 128,
        gpuOptions: { profile: { moe: { routerInt8X } } },
      });
      try {
        // The router (N·K = 8·128, far below matmul.int8MinWeights) is the step's one normed f32-out matmul.
        const labels = (await e.plan({ decode: 1, segments: [], logits: "sampled" })).list
          .map((d) => d.kernel.label).filter((l) => l.includes("_NORM_OUT_F32_"));
        expect(labels.length).toBe(2);
        const int8 = labels.filter((l) => l.startsWith("matmul_vec_q4x8")).length;
        expect(int8, labels.join("\n")).toBe(routerInt8X && e.gpu.profile.moe.int8X ? 2 : 0);
        const sched = new Scheduler(e);
        const r = await sched.submit({ prompt: [11, 2222, 333, 4444], maxTokens: 4 }).result;
        await sched.close();
        expect(r.error).toBeUndefined();
        expect(r.completionTokens).toBe(4);
        expect(e.gpu.takeErrors()).toEqual([]);
      } finally {
        e.destroy();
      }
    }
  });

  test("weights: uniform codes, scales in range, biases centre the group, norms near 1", async () => {
    const w = engine.weights as DecoderWeights;
    const qkv = w.layers[0].qkv;
    expect(qkv.parts.length).toBe(1); // q, k, v fused into one Linear
    expect(qkv.N).toBe(4 * 32 + 2 * 2 * 32);
    const { words, sc, bi, groups, n } = await readShard(engine.gpu, qkv.parts[0].w);
    const { lo, hi } = scaleRange(4);
    const hist = new Array(16).fill(0);
    let sum = 0;
    let sq = 0;
    for (let r = 0; r < n; r++) {
      for (let g = 0; g < groups; g++) {
        const s = bf16(sc[r * groups + g]);
        const b = bf16(bi[r * groups + g]);
        expect(s).toBeGreaterThanOrEqual(lo * 0.99);
        expect(s).toBeLessThanOrEqual(hi * 1.01);
        // b = −(7.5 + u − 0.5)·s, u in [0, 1): b/s in (−8, −7].
        expect(-b / s).toBeGreaterThan(6.95);
        expect(-b / s).toBeLessThan(8.05);
        for (let k = 0; k < 64; k++) {
          const e = (r * groups + g) * 64 + k;
          const q = (words[e >> 3] >>> (4 * (e & 7))) & 15;
          hist[q]++;
          const v = s * q + b;
          sum += v;
          sq += v * v;
        }
      }
    }
    const count = n * groups * 64;
    for (const h of hist) expect(Math.abs(h / count - 1 / 16)).toBeLessThan(0.2 / 16);
    const mean = sum / count;
    const std = Math.sqrt(sq / count - mean * mean);
    expect(Math.abs(mean)).toBeLessThan(0.002);
    expect(std).toBeGreaterThan(0.005); // about 0.011: the scale of a real checkpoint's weights
    expect(std).toBeLessThan(0.02);
    const norm = new Float32Array(await readBuffer(engine.gpu, w.layers[0].input_layernorm, 0, 128 * 4));
    for (const v of norm) expect(v >= 0.9 && v <= 1.1).toBe(true);
    expect(new Set(norm).size).toBeGreaterThan(100);
  });

  test("row shards continue one stream; has() follows a qwen3 checkpoint", async () => {
    const gpu = await Gpu.create();
    try {
      const config = {
        dims: { layers: 2 },
        quant: { default: { mode: "affine", bits: 4, groupSize: 64 }, overrides: new Map() },
      } as unknown as ArchConfig;
      const whole = new SyntheticWeights(gpu, config, { seed: 3 });
      const split = new SyntheticWeights(gpu, config, { seed: 3, maxShardRows: 64, tied: false });
      const a = (await whole.group(["x.q", "x.k"], [100, 60], 128)).parts[0].w;
      const b = (await split.group(["x.q", "x.k"], [100, 60], 128)).parts[0].w;
      expect(a.shards.length).toBe(1);
      expect(b.shards.map((s) => [s.n0, s.n])).toEqual([[0, 64], [64, 64], [128, 32]]);
      const full = await readShard(gpu, a);
      for (let i = 0; i < b.shards.length; i++) {
        const part = await readShard(gpu, b, i);
        const r0 = b.shards[i].n0;
        expect([...part.words]).toEqual([...full.words.subarray(r0 * 16, (r0 + part.n) * 16)]);
        expect([...part.sc]).toEqual([...full.sc.subarray(r0 * 2, (r0 + part.n) * 2)]);
        expect([...part.bi]).toEqual([...full.bi.subarray(r0 * 2, (r0 + part.n) * 2)]);
      }
      expect(whole.has("lm_head.weight")).toBe(false);
      expect(split.has("lm_head.weight")).toBe(true);
      expect(whole.has("model.layers.1.self_attn.q_proj.scales")).toBe(true);
      expect(whole.has("model.layers.0.self_attn.k_norm.weight")).toBe(true);
      expect(whole.has("model.layers.2.mlp.down_proj.weight")).toBe(false);
      expect(whole.has("model.layers.0.self_attn.q_proj.bias")).toBe(false);
      expect(gpu.takeErrors()).toEqual([]);
    } finally {
      gpu.destroy();
    }
  });

  test("bench.ts --synthetic tiny --quick runs end to end", async () => {
    const out = await Deno.makeTempDir({ prefix: "flint-bench-" });
    try {
      const p = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          `${ROOT}bench/bench.ts`,
          "--synthetic",
          "tiny",
          "--quick",
          "--out",
          out,
          "--baseline",
          "torch",
        ],
        env: { XDG_RUNTIME_DIR: "/tmp" },
      }).output();
      const stderr = new TextDecoder().decode(p.stderr);
      expect(p.code, stderr).toBe(0);
      expect(new TextDecoder().decode(p.stdout)).toContain("| decode 8 at depth 64 (tok/s) |");
      const r = JSON.parse(await Deno.readTextFile(`${out}/tiny-quick.json`));
      expect(r.ceilings.readGBs).toBeGreaterThan(0);
      const m = r.models[0];
      expect(m.model).toBe("tiny");
      for (const p of m.e2e.prefill) expect(p.tps.value).toBeGreaterThan(0);
      expect(m.e2e.decode.map((d: any) => d.depth)).toEqual([0, 64]);
      for (const d of m.e2e.decode) expect(d.tps.value).toBeGreaterThan(0);
      expect(m.e2e.prefillAtDepth.length).toBe(1);
      expect(m.loadMs).toBeGreaterThan(0);
      expect(m.memory.peak).toBeGreaterThanOrEqual(m.weightBytes);
      expect(m.kernels.map((k: any) => k.family)).toEqual(
        expect.arrayContaining(["matmul_vec", "matmul_tiled", "attention_decode", "attention_prefill"]),
      );
      for (const row of m.roofline.decode) expect(row.fraction).toBeGreaterThan(0);
      // No torch here: the baseline is reported as missing and the run goes on; with torch it has figures.
      expect(m.baseline.error ?? m.baseline.decode).toBeTruthy();
      expect((await Deno.readTextFile(`${out}/tiny-quick.svg`)).startsWith("<svg")).toBe(true);
      expect(await Deno.readTextFile(`${out}/tiny-quick.md`)).toContain("## tiny");
    } finally {
      await Deno.remove(out, { recursive: true });
    }
  });

  test("the prefill-at-depth bar goes to the chunk window that holds its depth", () => {
    const bar = BARS["qwen3-4b"].llamacpp;
    expect(atDepth(bar, { from: 12288, to: 14336 })).toBeUndefined();
    expect(atDepth(bar, { from: 14336, to: 16384 })).toBeUndefined();
    expect(atDepth(bar, { from: 16384, to: 18432 })).toBe(7400);
    expect(atDepth(BARS["qwen3-4b"].target, { from: 15872, to: 16896 })).toBe(3000);
    expect(atDepth(undefined, { from: 16384, to: 18432 })).toBeUndefined();
  });

  test("a missing python is reported, not thrown", async () => {
    const r = await runTorchBaseline({ model_type: "qwen3" }, {
      prompts: [4],
      depths: [0],
      decodeTokens: 2,
      runs: 1,
      warmup: 0,
      python: "no-such-python3",
    });
    expect(r.error).toContain("not found");
  });
});

/**
 * The Dawn backend (src/platform/dawn.ts, `--webgpu`): the flag's values, a clear error when the addon is
 * missing, `auto` taking Dawn only where it offers matrix units, and Tint (Dawn's WGSL compiler, on its null
 * backend: no GPU needed) accepting every kernel that the engines of the bundled model, the hybrid and MoE
 * fixtures and a 4-bit MoE shape build here. naga (Deno) and Tint differ: Tint needs `enable subgroups;`,
 * rejects `a < b & c` without parentheses, and checks uniformity. Running on Dawn needs a GPU it accepts
 * (lavapipe is not one): bench/NOTES.md has the H200 figures.
 */
import { describe, expect, test } from "vitest";
import { webgpuFlag } from "../../src/cli/args.ts";
import { Engine } from "../../src/engine/engine.ts";
import { Scheduler } from "../../src/engine/scheduler.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { reflect } from "../../src/gpu/kernel.ts";
import { preprocess } from "../../src/gpu/preprocess.ts";
import { SyntheticModelSource } from "../../src/loader/synthetic.ts";
import {
  dawnGpu,
  isNativeFunction,
  POLL_INTERVAL_MS,
  POLL_SPIN_MS,
  pollPacer,
} from "../../src/platform/dawn.ts";
import { defaultWebGpu, matrixKernelsRun } from "../../src/platform/mod.ts";
import { DiskModelSource } from "../../src/platform/deno.ts";
import { DEFAULT_MODEL, FIXTURES, ROOT } from "../util/fixtures.ts";

describe("--webgpu", () => {
  test("takes deno, dawn or auto (default auto); anything else is a ValidationError naming the flag", () => {
    expect(webgpuFlag(undefined)).toBe("auto");
    for (const v of ["deno", "dawn", "auto"]) expect(webgpuFlag(v)).toBe(v);
    expect(() => webgpuFlag("vulkan")).toThrow(/--webgpu vulkan: expected deno .*dawn .*auto/);
  });

  test("code that does not choose gets FLINT_WEBGPU's implementation, else Deno's; a bad value is an error", () => {
    const before = Deno.env.get("FLINT_WEBGPU");
    try {
      Deno.env.delete("FLINT_WEBGPU");
      expect(defaultWebGpu()).toBe("deno");
      for (const v of ["deno", "dawn", "auto"]) {
        Deno.env.set("FLINT_WEBGPU", v);
        expect(defaultWebGpu()).toBe(v);
      }
      Deno.env.set("FLINT_WEBGPU", "metal");
      expect(() => defaultWebGpu()).toThrow(/FLINT_WEBGPU=metal: expected deno, dawn or auto/);
    } finally {
      if (before === undefined) Deno.env.delete("FLINT_WEBGPU");
      else Deno.env.set("FLINT_WEBGPU", before);
    }
  });

  test("a missing dawn.node is a DeviceError naming the file and the fix", async () => {
    const before = Deno.env.get("FLINT_DAWN_NODE");
    Deno.env.set("FLINT_DAWN_NODE", "/nonexistent/dawn.node");
    try {
      await expect(dawnGpu(["backend=vulkan", "adapter=missing-addon-test"])).rejects.toThrow(
        /could not load \/nonexistent\/dawn\.node [^]*FLINT_DAWN_NODE/,
      );
    } finally {
      if (before === undefined) Deno.env.delete("FLINT_DAWN_NODE");
      else Deno.env.set("FLINT_DAWN_NODE", before);
    }
  });

  test("auto takes Dawn only where its matrix kernels run (f16 16×16×16, subgroups of 32)", async () => {
    const gpu = await Gpu.create({ webgpu: "auto" });
    try {
      const { webgpu, subgroupMatrix, subgroupMinSize, subgroupMaxSize } = gpu.info;
      if (webgpu === "dawn") {
        expect(matrixKernelsRun(subgroupMatrix, subgroupMinSize, subgroupMaxSize)).toBe(true);
      } else expect(webgpu).toBe("deno");
      expect(gpu.takeErrors()).toEqual([]);
    } finally {
      gpu.destroy();
    }
  });
});

describe("dawn.node's event polls (pollPacer)", () => {
  // A fake event loop: immediates and timers queued, a clock moved by hand.
  function loop() {
    const immediates: (() => void)[] = [];
    const timers: { cb: () => void; ms: number }[] = [];
    const clock = { t: 0 };
    const pacer = pollPacer(
      (cb, ...a) => immediates.push(() => cb(...a)),
      (cb, ms) => timers.push({ cb, ms }),
      () => clock.t,
    );
    return { immediates, timers, clock, pacer };
  }

  test("JS callbacks pass through with their arguments", () => {
    const { immediates, timers, pacer } = loop();
    const seen: unknown[] = [];
    pacer((...a) => seen.push(...a), 1, "two");
    expect(immediates.length).toBe(1);
    immediates.shift()!();
    expect(seen).toEqual([1, "two"]);
    expect(timers.length).toBe(0);
  });

  test("native polls spin for POLL_SPIN_MS, then come POLL_INTERVAL_MS apart; a new wait spins again", () => {
    const { immediates, timers, clock, pacer } = loop();
    let polls = 0;
    let more = 40;
    // Bound functions print as native code, like dawn.node's Node-API poll functions.
    const poll = function () {
      polls++;
      if (--more > 0) pacer(poll);
    }.bind(null);
    expect(isNativeFunction(poll)).toBe(true);
    pacer(poll);
    while (immediates.length && !timers.length) {
      immediates.shift()!();
      clock.t += 0.125;
    }
    // Polls ran back to back (0.125 ms apart here) until one came when the chain was POLL_SPIN_MS old.
    const spun = polls;
    expect(spun).toBe(POLL_SPIN_MS / 0.125 + 1);
    // From then on each poll waits for a timer of POLL_INTERVAL_MS, queued from an immediate.
    let paced = 0;
    while (more > 0) {
      if (immediates.length) immediates.shift()!();
      const timer = timers.shift();
      if (!timer) continue;
      expect(timer.ms).toBe(POLL_INTERVAL_MS);
      clock.t += POLL_INTERVAL_MS;
      timer.cb();
      paced++;
    }
    expect(polls).toBe(40);
    expect(paced).toBe(40 - spun);
    // The chain has ended: the next wait's first polls run at once again.
    more = 2;
    pacer(poll);
    expect(immediates.length).toBe(1);
    immediates.shift()!();
    expect(immediates.length).toBe(1);
    expect(timers.length).toBe(0);
  });

  // The null backend copies nothing: this checks the polling, not the bytes.
  test("dawn.node polls with native functions (what pacing keys on); paced readbacks resolve", async () => {
    const dawn = await dawnGpu(["backend=null"]);
    const device = await (await dawn.requestAdapter())!.requestDevice();
    const g = globalThis as unknown as { setImmediate: (cb: unknown, ...a: unknown[]) => unknown };
    const before = g.setImmediate;
    let native = 0;
    g.setImmediate = (cb, ...a) => {
      if (isNativeFunction(cb)) native++;
      return before(cb, ...a);
    };
    try {
      const src = device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
      const rb = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      for (let i = 0; i < 20; i++) {
        const e = device.createCommandEncoder();
        e.copyBufferToBuffer(src, 0, rb, 0, 16);
        device.queue.submit([e.finish()]);
        await rb.mapAsync(GPUMapMode.READ);
        expect(rb.getMappedRange().byteLength).toBe(16);
        rb.unmap();
      }
      expect(native).toBeGreaterThan(0);
    } finally {
      g.setImmediate = before;
      device.destroy();
    }
  });
});

/** Kernel labels with Tint's errors, for every kernel an engine on this machine compiled. */
async function tintErrors(device: GPUDevice, engine: Engine): Promise<string[]> {
  const out: string[] = [];
  for (const k of await engine.gpu.kernels.compiled()) {
    // The kernels were preprocessed for naga, which rejects the directive Tint requires.
    const code = /\bsubgroup[A-Z]/.test(k.source) ? `enable subgroups;\n${k.source}` : k.source;
    const info = await device.createShaderModule({ code }).getCompilationInfo();
    for (const m of info.messages) if (m.type === "error") out.push(`${k.label}:${m.lineNum}: ${m.message}`);
  }
  return out;
}

describe("Tint (Dawn's null backend) compiles the engine's kernels", () => {
  test("bundled model, hybrid and MoE fixtures, a 4-bit MoE shape: no errors", async () => {
    const dawn = await dawnGpu(["backend=null"]);
    const adapter = await dawn.requestAdapter();
    expect(adapter).not.toBeNull();
    const want = ["shader-f16", "subgroups"] as GPUFeatureName[];
    const device = await adapter!.requestDevice({
      requiredFeatures: want.filter((f) => adapter!.features.has(f)),
    });
    const base = new DiskModelSource(DEFAULT_MODEL);
    const moe = new SyntheticModelSource("tiny-moe", base);
    const models = [
      { name: "bundled", src: base },
      ...["lfm2", "gemma3_text", "qwen3_next_long", "qwen3_5_moe_text"].map((m) => ({
        name: m,
        src: new DiskModelSource(`${FIXTURES}/${m}`),
      })),
      { name: "tiny-moe", src: moe, weightSource: moe.weightSource({ seed: 5 }) },
    ];
    let kernels = 0;
    for (const m of models) {
      // On Deno's WebGPU (its kernels, as naga takes them) whatever FLINT_WEBGPU says.
      const engine = await Engine.load(m.src, {
        ...(m.weightSource ? { weightSource: m.weightSource } : {}),
        gpuOptions: { webgpu: "deno" },
        maxBatch: 2,
        contextWindow: 256,
        prefillChunk: 32,
      });
      try {
        // A prefill in chunks and some decode steps: the step kernels beyond the warm-up's.
        const sched = new Scheduler(engine);
        const prompt = Array.from({ length: 70 }, (_, i) => 3 + ((i * 7) % 50));
        const r = await sched.submit({ prompt, maxTokens: 3 }).result;
        await sched.close();
        expect(r.error, m.name).toBeUndefined();
        kernels += (await engine.gpu.kernels.compiled()).length;
        expect(await tintErrors(device, engine), m.name).toEqual([]);
      } finally {
        engine.destroy();
      }
    }
    expect(kernels).toBeGreaterThan(40);
    device.destroy();
  });

  test("matrix-unit kernels (matmul_sgmat, its f16 conversions, prefill attention; no GPU here runs them)", async () => {
    const dawn = await dawnGpu(["backend=null"]);
    const adapter = (await dawn.requestAdapter())!;
    const want = ["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"] as GPUFeatureName[];
    expect(want.every((f) => adapter.features.has(f))).toBe(true);
    const device = await adapter.requestDevice({ requiredFeatures: want });
    const read = (n: string) => Deno.readTextFileSync(`${ROOT}wgsl/${n}`);
    const base = { F16: 1, SUBGROUPS: 1, SUBGROUPS_DIRECTIVE: 1 };
    const fused = ["a@1", "w@2", "scales@4", "biases@5", "part@3"];
    const attn = ["rows@1", "q@2", "pages@3", "kv@4", "out@5"];
    const cases: [string, Record<string, number>, string[]][] = [
      ["matmul_sgmat.wgsl", {}, ["a@1", "b@2", "part@3"]],
      ["matmul_sgmat.wgsl", { FUSED_DEQUANT: 1 }, fused],
      ["matmul_sgmat.wgsl", { FUSED_DEQUANT: 1, SCALE_F16: 1 }, fused],
      ["dequant_f16.wgsl", {}, ["w@1", "scales@2", "biases@3", "out@4"]],
      ["dequant_f16.wgsl", { SCALE_F16: 1 }, ["w@1", "scales@2", "biases@3", "out@4"]],
      ["rows_f16.wgsl", {}, ["x@1", "out@2"]],
      ["attention_prefill_sgmat.wgsl", { F16_TILES: 1 }, attn],
      ["attention_prefill_sgmat.wgsl", { F16_TILES: 1, WINDOW: 1 }, attn],
      ["attention_prefill_sgmat.wgsl", { KV8: 1 }, ["rows@1", "q@2", "pages@3", "kv@4", "kvs@6", "out@5"]],
    ];
    for (const [file, more, bindings] of cases) {
      const code = preprocess(read(file), { ...base, ...more }, read, file);
      const info = await device.createShaderModule({ code }).getCompilationInfo();
      const errors = info.messages.filter((m) => m.type === "error").map((m) => `${m.lineNum}: ${m.message}`);
      expect(errors, `${file} ${JSON.stringify(more)}`).toEqual([]);
      // wgsl_reflect cannot parse subgroup-matrix types: the bindings come from the source without them.
      expect(reflect(code).storage.map((b) => `${b.name}@${b.binding}`)).toEqual(bindings);
    }
    device.destroy();
  });
});

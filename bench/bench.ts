/**
 * `deno task bench` (or `deno run -A bench/bench.ts`): per model, load time, first-run compilation, prefill
 * (TTFT) for several prompt lengths, decode tok/s at several depths, peak GPU memory, and per kernel family
 * GB/s and GFLOP/s against ceilings probed in the same run; optionally the PyTorch baseline of the same
 * shape. Prints a Markdown table; writes JSON, the table and an SVG chart to --out.
 *
 *   --synthetic NAME[,NAME]   random MLX 4-bit g64 weights of a shape (tiny, qwen3-0.6b, qwen3-4b, qwen3-8b,
 *                             qwen3-30b-a3b (MoE), qwen3-next-80b-a3b (hybrid), tiny-moe, tiny-next)
 *   --model DIR[,DIR]         real model folders ("default": the bundled model)
 *   --prompts 512,4096,16384,24576  --depths 0,4096,16384  --decode-tokens 128  --runs 3  --warmup 1
 *     [--full-warmup]
 *   --steps-per-submit N  --prefill-chunk N  --f32  --seed N  --kv-cache act|q8 (the 8-bit KV cache)
 *   --webgpu deno|dawn|auto   the WebGPU implementation (src/platform/dawn.ts)
 *   --max-batch N (engine sized as the server's, 8: a lone prompt takes the solo chunk; default 1)
 *   --profile JSON            kernel profile changes (src/gpu/profile.ts),
 *                             e.g. '{"decodeAttention":{"keysPerSplit":128}}'
 *   --baseline torch [--python python3] [--baseline-args "--cache dynamic"]
 *   --skip probes,kernels     --target-ms N (GPU time per kernel sample, default 100)
 *   --out DIR (default bench/results/)  --name LABEL  --json FILE  --quick (tiny sizes, for software GPUs)
 * Progress goes to stderr, the table to stdout.
 * @module
 */
import { kvCacheFlag, parseFlags, runCli, webgpuFlag } from "../src/cli/args.ts";
import type { WebGpuChoice } from "../src/platform/mod.ts";
import type { KvCacheType } from "../src/engine/kv_pool.ts";
import { ValidationError } from "../src/errors.ts";
import { Gpu } from "../src/gpu/device.ts";
import type { ProfileOverrides } from "../src/gpu/profile.ts";
import { syntheticConfig } from "../src/loader/synthetic.ts";
import { runTorchBaseline, type TorchBaseline } from "./baseline.ts";
import { measureKernels } from "./kernels.ts";
import { loadModel, measureE2E, type ModelSpec, modelSpecs } from "./measure.ts";
import { measureCeilings } from "../src/lab/probes.ts";
import {
  type BenchCeilings,
  type BenchResult,
  markdown,
  type ModelResult,
  type RooflineRow,
  svgChart,
} from "./report.ts";
import { BARS, decodeBytes, modelCost, prefillCeilingTps, prefillFlops } from "./roofline.ts";

const SPEC = {
  synthetic: "string",
  model: "string",
  prompts: "string",
  depths: "string",
  "decode-tokens": "number",
  runs: "number",
  warmup: "number",
  "full-warmup": "boolean",
  "steps-per-submit": "number",
  "prefill-chunk": "number",
  f32: "boolean",
  webgpu: "string",
  seed: "number",
  "max-batch": "number",
  profile: "string",
  baseline: "string",
  python: "string",
  "baseline-args": "string",
  skip: "string",
  "target-ms": "number",
  out: "string",
  name: "string",
  json: "string",
  quick: "boolean",
  help: "boolean",
  "kv-cache": "string",
} as const;

const log = (s: string) => console.error(s);

function list(s: string | undefined, fallback: number[], flag: string): number[] {
  if (s === undefined) return fallback;
  const xs = s.split(",").filter((x) => x.trim()).map(Number);
  if (xs.some((x) => !Number.isInteger(x) || x < 0)) {
    throw new ValidationError(`--${flag} expects non-negative integers, got "${s}"`, flag);
  }
  return xs;
}

export async function main(argv: string[]): Promise<number> {
  const f = parseFlags(argv, SPEC);
  if (f.help) {
    const doc = Deno.readTextFileSync(new URL(import.meta.url)).split("\n");
    console.log(doc.slice(1, doc.findIndex((l) => l.includes("@module"))).join("\n").replace(/^ \* ?/gm, ""));
    return 0;
  }
  const q = !!f.quick;
  // 24576: its chunks from depth 16,384 on (16k–18k in 2048-row chunks, 16k–20k in 4096-row ones) come
  // before its final chunk; that window is the prefill-at-depth figure.
  const prompts = list(f.prompts, q ? [16, 64] : [512, 4096, 16384, 24576], "prompts");
  const depths = list(f.depths, q ? [0, 64] : [0, 4096, 16384], "depths");
  const decodeTokens = f["decode-tokens"] ?? (q ? 8 : 128);
  const runs = f.runs ?? (q ? 1 : 3);
  const warmup = f.warmup ?? 1;
  const prefillChunk = f["prefill-chunk"] ?? (q ? 16 : undefined);
  const kvCache = kvCacheFlag(f["kv-cache"]);
  const skip = new Set((f.skip ?? "").split(",").filter(Boolean));
  const targetMs = f["target-ms"] ?? (q ? 10 : 100);
  if (f.baseline !== undefined && f.baseline !== "torch") {
    throw new ValidationError(`--baseline: only "torch" is known`, "baseline");
  }

  const specs = modelSpecs(f.synthetic, f.model);

  const outDir = f.out ?? new URL("./results/", import.meta.url).pathname;
  const name = f.name ?? specs.map((s) => s.label).join("_") + (q ? "-quick" : "");
  const jsonPath = f.json ?? `${outDir.replace(/\/$/, "")}/${name}.json`;
  await Deno.mkdir(outDir, { recursive: true });

  const t0 = performance.now();
  let profile: ProfileOverrides | undefined;
  try {
    profile = f.profile ? JSON.parse(f.profile) : undefined;
  } catch (e) {
    throw new ValidationError(`--profile: not JSON (${(e as Error).message})`, "profile");
  }
  const webgpu = webgpuFlag(f.webgpu);
  const probeGpu = await Gpu.create({ f16: !f.f32, profile, webgpu });
  const info = probeGpu.info;
  const result: BenchResult = {
    version: 1,
    date: new Date().toISOString(),
    command: `deno run -A bench/bench.ts ${argv.join(" ")}`,
    machine: {
      adapter: info.adapter,
      webgpu: info.webgpu,
      f16: info.f16,
      subgroups: info.subgroups,
      timestamps: info.timestamps,
      maxBindingBytes: info.maxBinding,
      deno: Deno.version.deno,
      os: `${Deno.build.os} ${Deno.build.arch}`,
      cpus: navigator.hardwareConcurrency,
    },
    settings: {
      prompts: prompts.join("/"),
      depths: depths.join("/"),
      "decode tokens": decodeTokens,
      runs,
      "warm-up runs": warmup,
      ...(prefillChunk ? { "prefill chunk": prefillChunk } : {}),
      ...(kvCache ? { "kv cache": kvCache } : {}),
      ...(f["steps-per-submit"] ? { "steps per submit": f["steps-per-submit"] } : {}),
      ...(f["max-batch"] ? { "max batch": f["max-batch"] } : {}),
      ...(f.profile ? { "kernel profile": f.profile } : {}),
    },
    ceilings: null,
    models: [],
  };
  let ceil: BenchCeilings | null = null;
  try {
    if (!skip.has("probes")) {
      // The kernel lab's probes (src/lab/probes.ts), on a device of their own so the engine's ledger is
      // clean.
      log(`[bench] probes on ${info.adapter}`);
      const lab = await measureCeilings(probeGpu);
      ceil = {
        readGBs: lab.readGBs,
        matmulGFLOPs: Math.max(lab.f32GFlops, lab.f16GFlops ?? 0),
        int8GOps: lab.int8GOps,
        lab,
      };
      log(
        `  read ${lab.readGBs.toFixed(1)} GB/s (wg ${lab.readWG}), matmul f32 ${
          lab.f32GFlops.toFixed(1)
        } / f16 ${lab.f16GFlops?.toFixed(1) ?? "–"} GFLOP/s, int8 ${
          lab.int8GOps?.toFixed(1) ?? "–"
        } GOP/s (${lab.method})`,
      );
    }
  } finally {
    probeGpu.destroy();
  }
  result.ceilings = ceil;

  let failed = false;
  for (const spec of specs) {
    try {
      result.models.push(
        await benchModel(spec, {
          prompts,
          depths,
          decodeTokens,
          runs,
          warmup,
          prefillChunk,
          maxBatch: f["max-batch"],
          kvCache,
          f32: !!f.f32,
          webgpu,
          seed: f.seed ?? 1,
          profile,
          stepsPerSubmit: f["steps-per-submit"],
          fullWarmup: !!f["full-warmup"],
          ceil,
          kernels: !skip.has("kernels"),
          targetMs,
          baseline: f.baseline === "torch"
            ? { python: f.python, extra: f["baseline-args"]?.split(" ").filter(Boolean) }
            : null,
        }),
      );
    } catch (e) {
      failed = true;
      log(`[bench] ${spec.label} failed: ${(e as Error).stack ?? e}`);
    }
    await writeOutputs(result, outDir, name, jsonPath);
  }
  console.log(markdown(result));
  log(
    `[bench] wrote ${jsonPath}, ${outDir.replace(/\/$/, "")}/${name}.{md,svg} in ${
      ((performance.now() - t0) / 1000).toFixed(1)
    } s`,
  );
  return failed ? 1 : 0;
}

interface ModelRunOptions {
  prompts: number[];
  depths: number[];
  decodeTokens: number;
  runs: number;
  warmup: number;
  prefillChunk?: number;
  maxBatch?: number;
  kvCache?: KvCacheType;
  f32: boolean;
  webgpu: WebGpuChoice;
  seed: number;
  profile?: ProfileOverrides;
  stepsPerSubmit?: number;
  fullWarmup: boolean;
  ceil: BenchCeilings | null;
  kernels: boolean;
  targetMs: number;
  baseline: { python?: string; extra?: string[] } | null;
}

async function benchModel(spec: ModelSpec & { label: string }, o: ModelRunOptions): Promise<ModelResult> {
  const chunk = o.prefillChunk ?? 512;
  const maxDepth = Math.max(1, ...o.depths);
  // A prompt run generates one token, so it needs its length + 1 (`--prompts 16384 --depths 0` failed).
  const ctx =
    Math.ceil(Math.max(...o.prompts.map((n) => n + 1), maxDepth + Math.max(o.decodeTokens + 1, chunk)) / 16) *
    16;
  log(`[bench] ${spec.label}: loading (context window ${ctx})`);
  const { engine, loadMs, compileMs } = await loadModel(spec, {
    contextWindow: ctx,
    prefillChunk: o.prefillChunk,
    maxBatch: o.maxBatch,
    kvCache: o.kvCache,
    f32: o.f32,
    webgpu: o.webgpu,
    seed: o.seed,
    profile: o.profile,
  });
  log(
    `  load ${loadMs.toFixed(0)} ms, compile ${compileMs.toFixed(0)} ms, weights ${
      (engine.info.weightBytes / 2 ** 30).toFixed(2)
    } GiB`,
  );
  let res: ModelResult;
  try {
    const e2e = await measureE2E(engine, {
      prompts: o.prompts,
      depths: o.depths,
      decodeTokens: o.decodeTokens,
      runs: o.runs,
      warmup: o.warmup,
      stepsPerSubmit: o.stepsPerSubmit,
      fullWarmup: o.fullWarmup,
      seed: o.seed,
      log,
    });
    const kernels = o.kernels && o.ceil
      ? await measureKernels(engine, o.ceil, { depths: o.depths, timer: { targetMs: o.targetMs }, log })
      : [];
    const cost = modelCost(engine);
    const readBs = (o.ceil?.readGBs ?? NaN) * 1e9;
    const rates = {
      matmul: (o.ceil?.matmulGFLOPs ?? NaN) * 1e9,
      int8: o.ceil?.int8GOps ? o.ceil.int8GOps * 1e9 : null,
    };
    const roof = (label: string, achievedTps: number, perToken: number, ceilingTps: number): RooflineRow => {
      return { label, achievedTps, perToken, ceilingTps, fraction: achievedTps / ceilingTps };
    };
    const pre = (label: string, tps: number, n: number, p0: number) =>
      roof(label, tps, prefillFlops(cost, n, p0), prefillCeilingTps(cost, n, p0, rates));
    res = {
      model: spec.label,
      source: spec.synthetic ? "synthetic weights" : spec.dir!,
      dims: engine.config.dims,
      quantization: engine.info.quantization,
      contextWindow: engine.contextWindow,
      weightBytes: engine.info.weightBytes,
      cost,
      loadMs,
      compileMs,
      e2e,
      memory: engine.gpu.memory.snapshot(),
      kernels,
      roofline: {
        prefill: e2e.prefill.map((p) => pre(`prefill ${p.tokens}`, p.tps.value, p.tokens, 0)),
        prefillAtDepth: e2e.prefillAtDepth.map((p) =>
          pre(`prefill at ${p.from}-${p.to}`, p.tps.value, p.to - p.from, p.from)
        ),
        decode: e2e.decode.map((d) => {
          const bytes = decodeBytes(cost, d.depth);
          return roof(`decode at ${d.depth}`, d.tps.value, bytes, readBs / bytes);
        }),
      },
      baseline: null,
      bar: BARS[spec.label] ?? null,
    };
  } finally {
    engine.destroy();
  }
  if (o.baseline) {
    log(`[bench] ${spec.label}: PyTorch baseline`);
    const config = spec.synthetic
      ? syntheticConfig(spec.synthetic)
      : JSON.parse(await Deno.readTextFile(`${spec.dir}/config.json`));
    const b: TorchBaseline = await runTorchBaseline(config, {
      prompts: o.prompts,
      depths: o.depths,
      decodeTokens: o.decodeTokens,
      runs: o.runs,
      warmup: o.warmup,
      python: o.baseline.python,
      extra: o.baseline.extra,
      log,
    });
    if (b.error) log(`  baseline not available: ${b.error}`);
    res.baseline = b;
  }
  return res;
}

async function writeOutputs(r: BenchResult, dir: string, name: string, jsonPath: string): Promise<void> {
  const base = `${dir.replace(/\/$/, "")}/${name}`;
  await Deno.writeTextFile(jsonPath, JSON.stringify(r, null, 2) + "\n");
  await Deno.writeTextFile(`${base}.md`, markdown(r));
  await Deno.writeTextFile(`${base}.svg`, svgChart(r));
}

if (import.meta.main) await runCli(main);

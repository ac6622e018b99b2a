/**
 * `deno task kernel wgsl/NAME.wgsl`: one kernel on random inputs through its host wrapper, checked against
 * its float64 reference, then timed and set against the adapter's measured ceilings.
 *   [--shape k=v,...] (over the case's realistic default shape)  [--small] (start from the small shape)
 *   [--f32] (force f32 activations)  [--iters N] (timed runs, default 10; 0: check only)  [--seed S]
 *   [--wall] (time by the wall clock even where the adapter has timestamp queries)
 *   [--no-check]  [--no-probe]  [--json]  [--list]
 * Exit status 1 when the kernel misses its tolerance.
 * @module
 */
import { ValidationError } from "../errors.ts";
import { Gpu } from "../gpu/device.ts";
import { parseShape, resolveShape } from "../lab/case.ts";
import { caseFor, CASES } from "../lab/cases.ts";
import { describeReport } from "../lab/compare.ts";
import { type Ceilings, measureCeilings } from "../lab/probes.ts";
import { type BenchReport, runCase } from "../lab/run.ts";
import { parseFlags, runCli, webgpuFlag } from "./args.ts";

const SPEC = {
  shape: "string",
  small: "boolean",
  f32: "boolean",
  webgpu: "string",
  iters: "number",
  seed: "number",
  "no-check": "boolean",
  wall: "boolean",
  "no-probe": "boolean",
  json: "boolean",
  list: "boolean",
  help: "boolean",
} as const;

const USAGE =
  "usage: deno task kernel wgsl/NAME.wgsl [--shape k=v,...] [--small] [--f32] [--iters N] [--seed S]\n" +
  "       [--webgpu deno|dawn|auto] [--wall] [--no-check] [--no-probe] [--json] | --list";

export async function main(argv: string[]): Promise<number> {
  const f = parseFlags(argv, SPEC);
  if (f.help) {
    console.log(USAGE);
    return 0;
  }
  if (f.list) {
    for (const c of CASES) {
      console.log(`${c.files.join(" + ")}: ${c.summary}`);
      for (const [k, doc] of Object.entries(c.keys)) {
        console.log(`    ${k}=${c.defaults[k]} (small ${c.small[k]})  ${doc}`);
      }
    }
    return 0;
  }
  if (f._.length !== 1) throw new ValidationError(`give one kernel file\n${USAGE}`, "kernel");
  const c = caseFor(f._[0]);
  const iters = f.iters ?? 10;
  if (!Number.isInteger(iters) || iters < 0) {
    throw new ValidationError(`--iters ${iters}: need an integer ≥ 0`, "iters");
  }
  const shape = resolveShape(c, { ...(f.small ? c.small : {}), ...parseShape(f.shape ?? "") });
  const gpu = await Gpu.create({ f16: !f.f32, webgpu: webgpuFlag(f.webgpu) });
  try {
    const report = await runCase(gpu, c, {
      shape,
      seed: f.seed ?? 1,
      iters,
      check: !f["no-check"],
      wall: f.wall,
    });
    const ceil = iters > 0 && !f["no-probe"] ? await measureCeilings(gpu) : null;
    if (f.json) console.log(JSON.stringify({ ...report, ceilings: ceil, adapter: gpu.info.adapter }));
    else print(report, ceil, gpu, c.summary);
    return report.ok || f["no-check"] ? 0 : 1;
  } finally {
    gpu.destroy();
  }
}

function print(r: BenchReport, ceil: Ceilings | null, gpu: Gpu, summary: string): void {
  const line = (k: string, v: string) => console.log(`${k.padEnd(8)} ${v}`);
  line("kernel", `${r.file}: ${summary}`);
  line("adapter", `${gpu.info.adapter} (WebGPU of ${gpu.info.webgpu}), activations ${r.act}`);
  line("shape", Object.entries(r.shape).map(([k, v]) => `${k}=${v}`).join(" "));
  if (r.outputs.length) {
    line("check", `${r.ok ? "ok" : "FAIL"} (seed ${r.seed})`);
    for (const o of r.outputs) console.log(describeReport(o).replace(/^/gm, "  "));
  }
  for (const e of r.deviceErrors) line("error", e);
  if (!r.timing) return;
  const ms = r.timing.medianMs;
  line("time", `median ${fmt(ms)} ms over ${r.timing.samples.length} runs (${r.timing.method})`);
  const gbs = r.cost.bytes / (ms * 1e6);
  const gfs = r.cost.flops / (ms * 1e6);
  const of = (v: number, c: number | null | undefined) => (c ? ` = ${fmt((100 * v) / c)}% of ${fmt(c)}` : "");
  line(
    "memory",
    `${fmt(r.cost.bytes / 1e6)} MB → ${fmt(gbs)} GB/s${of(gbs, ceil?.readGBs)}${
      ceil ? " (streaming read)" : ""
    }`,
  );
  if (r.cost.flops > 0) {
    const i8 = !!(r.cost.int8 && ceil?.int8GOps);
    const c = ceil
      ? (i8 ? ceil.int8GOps : r.act === "f16" && ceil.f16GFlops ? ceil.f16GFlops : ceil.f32GFlops)
      : null;
    line(
      "compute",
      `${fmt(r.cost.flops / 1e9)} GFLOP → ${fmt(gfs)} GFLOP/s${of(gfs, c)}${
        ceil ? ` (${i8 ? "int8" : r.act} matmul probe)` : ""
      }`,
    );
  }
  if (ceil) {
    line(
      "ceiling",
      `read ${fmt(ceil.readGBs)} GB/s (workgroup ${ceil.readWG}), matmul f32 ${fmt(ceil.f32GFlops)} GFLOP/s` +
        (ceil.f16GFlops ? `, f16 ${fmt(ceil.f16GFlops)} GFLOP/s` : "") +
        (ceil.int8GOps ? `, int8 ${fmt(ceil.int8GOps)} GOP/s` : "") + ` (${ceil.method})`,
    );
  }
}

function fmt(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 0.01 ? v.toFixed(2) : v.toExponential(2);
}

if (import.meta.main) await runCli(main);

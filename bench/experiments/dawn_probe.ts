/**
 * Probe of the Dawn backend's tensor cores (not part of the engine): Dawn's Node-API addon (npm `webgpu`,
 * `dist/<platform>/dawn.node`) loaded in Deno, its `chromium-experimental-subgroup-matrix` feature, and an
 * int8 GEMM built on it, checked against a CPU reference, then timed on the prefill shapes of the reference
 * model (C[M, N] = A[M, K] · W[N, K]ᵀ, i8 × i8 → i32; the 4-bit weights and int8-quantised activations of a
 * future quantised prefill path).
 *   deno run -A bench/experiments/dawn_probe.ts --dawn path/to/dawn.node [--json FILE]
 * Each subgroup owns a 32×32 output block (2×2 tiles of 16×16), loading its tiles straight from storage;
 * a workgroup is 4 subgroups (64×64). A first probe, not a tuned kernel.
 * @module
 */
import { parseFlags } from "../../src/cli/args.ts";

// node:module by a computed name: a static import makes `deno check` look for @types/node, which the project
// does not install.
const NODE_MODULE = "node:" + "module";
const { createRequire } = (await import(NODE_MODULE)) as {
  createRequire: (url: string) => (id: string) => unknown;
};

const f = parseFlags(Deno.args, { dawn: "string", json: "string" } as const);
if (!f.dawn) throw new Error("--dawn path/to/dawn.node is required");
const { create } = createRequire(import.meta.url)(f.dawn) as { create: (flags: string[]) => GPU };
const gpu = create(["enable-dawn-features=allow_unsafe_apis"]);
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
if (!adapter) throw new Error("no adapter");
const info: Record<string, unknown> = {};
for (const k of ["vendor", "architecture", "device", "description", "subgroupMinSize", "subgroupMaxSize"]) {
  info[k] = (adapter.info as unknown as Record<string, unknown>)[k];
}
// The configs are objects whose fields are getters (JSON.stringify shows {}): read them by name.
const configs =
  ((adapter.info as unknown as { subgroupMatrixConfigs?: Record<string, unknown>[] }).subgroupMatrixConfigs ??
    []).map((c) =>
      Object.fromEntries(["M", "N", "K", "componentType", "resultComponentType"].map((k) => [k, c[k]]))
    );
// H200 (driver 580.159.04, webgpu 0.6.2): i8/u8 16×16×32 and 16×8×32 only, and no shader-f16 (requestDevice
// refuses it), so Dawn offers no f16 tensor cores there, nor the engine's f16 kernels (bench/NOTES.md #79).
const out: Record<string, unknown> = {
  info,
  features: [...adapter.features].sort(),
  shaderF16: adapter.features.has("shader-f16"),
  subgroupMatrixConfigs: configs,
};
console.log(JSON.stringify(out, null, 1));
const feature = "chromium-experimental-subgroup-matrix" as GPUFeatureName;
if (!adapter.features.has(feature)) throw new Error("no subgroup-matrix feature");
const device = await adapter.requestDevice({
  requiredFeatures: [feature, "subgroups" as GPUFeatureName, "timestamp-query"],
  requiredLimits: {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  },
});
device.addEventListener(
  "uncapturederror",
  (e) => console.error("[dawn]", (e as GPUUncapturedErrorEvent).error.message),
);

const code = `
enable chromium_experimental_subgroup_matrix;
enable subgroups;
struct P { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<i32>;   // [M, K] i8, packed
@group(0) @binding(2) var<storage, read> w: array<i32>;   // [N, K] i8, packed
@group(0) @binding(3) var<storage, read_write> c: array<i32>;  // [M, N]
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(subgroup_id) sid: u32) {
  let m0 = wid.y * 64u + (sid / 2u) * 32u;
  let n0 = wid.x * 64u + (sid % 2u) * 32u;
  var c00 = subgroup_matrix_result<i32, 16, 16>();
  var c01 = subgroup_matrix_result<i32, 16, 16>();
  var c10 = subgroup_matrix_result<i32, 16, 16>();
  var c11 = subgroup_matrix_result<i32, 16, 16>();
  for (var k = 0u; k < p.K; k += 32u) {
    let l0 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&a, m0 * p.K + k, false, p.K);
    let l1 = subgroupMatrixLoad<subgroup_matrix_left<i8, 32, 16>>(&a, (m0 + 16u) * p.K + k, false, p.K);
    let r0 = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&w, n0 * p.K + k, true, p.K);
    let r1 = subgroupMatrixLoad<subgroup_matrix_right<i8, 16, 32>>(&w, (n0 + 16u) * p.K + k, true, p.K);
    c00 = subgroupMatrixMultiplyAccumulate(l0, r0, c00);
    c01 = subgroupMatrixMultiplyAccumulate(l0, r1, c01);
    c10 = subgroupMatrixMultiplyAccumulate(l1, r0, c10);
    c11 = subgroupMatrixMultiplyAccumulate(l1, r1, c11);
  }
  subgroupMatrixStore(&c, m0 * p.N + n0, c00, false, p.N);
  subgroupMatrixStore(&c, m0 * p.N + n0 + 16u, c01, false, p.N);
  subgroupMatrixStore(&c, (m0 + 16u) * p.N + n0, c10, false, p.N);
  subgroupMatrixStore(&c, (m0 + 16u) * p.N + n0 + 16u, c11, false, p.N);
}`;
const module = device.createShaderModule({ code });
const ci = await module.getCompilationInfo();
for (const m of ci.messages) console.log(`[wgsl ${m.type}] ${m.lineNum}:${m.linePos} ${m.message}`);
const pipe = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });

const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
function setup(M: number, N: number, K: number, fill: boolean) {
  const A = new Int8Array(M * K), W = new Int8Array(N * K);
  if (fill) {
    let s = 12345;
    const r = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) >>> 16) % 255 - 127 || 1;
    for (let i = 0; i < A.length; i++) A[i] = r();
    for (let i = 0; i < W.length; i++) W[i] = r();
  }
  const mk = (data: ArrayBufferView | null, size: number) => {
    const b = device.createBuffer({ size, usage });
    if (data) device.queue.writeBuffer(b, 0, data);
    return b;
  };
  const u = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(u, 0, new Uint32Array([M, N, K, 0]));
  const ba = mk(A, A.byteLength), bw = mk(W, W.byteLength), bc = mk(null, M * N * 4);
  const bg = device.createBindGroup({
    layout: pipe.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer: u } }, { binding: 1, resource: { buffer: ba } }, {
      binding: 2,
      resource: { buffer: bw },
    }, { binding: 3, resource: { buffer: bc } }],
  });
  return { A, W, bc, bg, grid: [N / 64, M / 64] as const, bufs: [u, ba, bw, bc] };
}
async function read(b: GPUBuffer, size: number): Promise<Int32Array> {
  const s = device.createBuffer({ size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const e = device.createCommandEncoder();
  e.copyBufferToBuffer(b, 0, s, 0, size);
  device.queue.submit([e.finish()]);
  await s.mapAsync(GPUMapMode.READ);
  const r = new Int32Array(s.getMappedRange().slice(0));
  s.unmap();
  s.destroy();
  return r;
}
function run(t: ReturnType<typeof setup>, reps: number) {
  const e = device.createCommandEncoder();
  const pass = e.beginComputePass();
  pass.setPipeline(pipe);
  pass.setBindGroup(0, t.bg);
  for (let i = 0; i < reps; i++) pass.dispatchWorkgroups(t.grid[0], t.grid[1]);
  pass.end();
  device.queue.submit([e.finish()]);
}

// Correctness on a small odd-sized case (multiples of the 64×64 block and of K = 32).
{
  const M = 192, N = 320, K = 416;
  const t = setup(M, N, K, true);
  run(t, 1);
  const got = await read(t.bc, M * N * 4);
  let bad = 0;
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += t.A[m * K + k] * t.W[n * K + k];
      if (got[m * N + n] !== s) bad++;
    }
  }
  out.check = { M, N, K, mismatches: bad };
  console.log(`int8 GEMM ${M}x${N}x${K}: ${bad} of ${M * N} outputs differ from the CPU reference`);
  t.bufs.forEach((b) => b.destroy());
}
// Timing on the reference model's prefill shapes, 2048-row chunks.
const timings: Record<string, number> = {};
for (
  const [name, N, K] of [["qkv", 6144, 2560], ["o_proj", 2560, 4096], ["gate_up", 19456, 2560], [
    "down",
    2560,
    9728,
  ]] as const
) {
  const M = 2048;
  console.log(`${name}: setting up`);
  const t = setup(M, N, K, false);
  run(t, 3);
  await device.queue.onSubmittedWorkDone();
  const reps = 20;
  const t0 = performance.now();
  run(t, reps);
  await device.queue.onSubmittedWorkDone();
  const s = (performance.now() - t0) / 1000 / reps;
  timings[name] = (2 * M * N * K) / s / 1e12;
  console.log(
    `int8 GEMM ${name} ${M}x${N}x${K}: ${(s * 1e6).toFixed(0)} us, ${timings[name].toFixed(1)} TOPS`,
  );
  t.bufs.forEach((b) => b.destroy());
}
out.tops = timings;
if (f.json) Deno.writeTextFileSync(f.json, JSON.stringify(out, null, 1));
device.destroy();
Deno.exit(0);

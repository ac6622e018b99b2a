// Lead's scratch kernel timing on real shapes (superseded by bench/bench.ts). Many dispatches per submit.
import { Gpu } from "../src/gpu/device.ts";
import { encodeDispatches, ParamArena } from "../src/gpu/kernel.ts";
import { matmul } from "../src/ops/matmul.ts";
import { attentionDecode, setDecodeAttentionTuning } from "../src/ops/attention.ts";
import type { Linear } from "../src/ops/linear.ts";
import { setMatmulTuning } from "../src/ops/matmul.ts";

const F32 = Deno.args.includes("--f32");
const QUICK = Deno.args.includes("--quick");
const gpu = await Gpu.create({ f16: !F32 });
console.log(JSON.stringify(gpu.info));
const dev = gpu.device;
function buf(size: number, fill = true) {
  const b = dev.createBuffer({ size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
  if (fill) {
    const chunk = new Uint32Array(Math.min(size, 1 << 24) / 4);
    for (let i = 0; i < chunk.length; i++) chunk[i] = (Math.imul(i, 2654435761) ^ (i >>> 7)) & 0x3bff3bff;
    for (let o = 0; o < size; o += chunk.byteLength) dev.queue.writeBuffer(b, o, chunk, 0, Math.min(chunk.length, (size - o) / 4));
  }
  return b;
}
function qlinear(N: number, K: number): Linear {
  return { name: `q${N}x${K}`, N, K, format: { kind: "q", bits: 4, groupSize: 64, scaleF16: false },
    shards: [{ n0: 0, n: N, w: buf(N * K / 2), scales: buf(N * K / 64 * 2), biases: buf(N * K / 64 * 2) }] };
}
// GPU time of `reps` repetitions of the recorded dispatches in one pass, from timestamp queries.
const qs = dev.createQuerySet({ type: "timestamp", count: 2 });
const qres = dev.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
const qread = dev.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
async function gpuTime(list: any[], reps: number, maxKvLen: number, minKvLen = 0): Promise<number> {
  const enc = dev.createCommandEncoder();
  const pass = enc.beginComputePass({ timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 } });
  for (let i = 0; i < reps; i++) encodeDispatches(pass, list, { maxKvLen, minKvLen });
  pass.end();
  enc.resolveQuerySet(qs, 0, 2, qres, 0);
  enc.copyBufferToBuffer(qres, 0, qread, 0, 16);
  dev.queue.submit([enc.finish()]);
  await qread.mapAsync(GPUMapMode.READ);
  const t = new BigUint64Array(qread.getMappedRange().slice(0));
  qread.unmap();
  return Number(t[1] - t[0]) / 1e9;
}
async function time(label: string, rec: (ctx: any) => Promise<void>, reps: number, bytes: number, flops: number, maxKvLen = 1, minKvLen = 0) {
  const ctx = { gpu, arena: new ParamArena(gpu), list: [] as any[] };
  await rec(ctx);
  ctx.arena.flush();
  await gpuTime(ctx.list, 2, maxKvLen, minKvLen);
  const per = Math.min(await gpuTime(ctx.list, reps, maxKvLen, minKvLen), await gpuTime(ctx.list, reps, maxKvLen, minKvLen)) / reps;
  console.log(`${label.padEnd(52)} ${(per * 1e6).toFixed(1).padStart(8)} us  ${(bytes / per / 1e9).toFixed(0).padStart(6)} GB/s  ${(flops / per / 1e9).toFixed(0).padStart(7)} GFLOP/s`);
  return per;
}
// A streaming-read ceiling: xor-reduce a large buffer with vec4<u32> loads.
{
  const size = 1 << 30;
  const big = buf(size, false);
  const out = buf(1 << 20, false);
  const code = `@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>; @group(0) @binding(1) var<storage, read_write> o: array<u32>;
override WG: u32 = 512; @compute @workgroup_size(WG) fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let stride = n.x * WG; var acc = vec4<u32>(0u); for (var i = g.x; i < arrayLength(&a); i += stride) { acc ^= a[i]; }
  if (acc.x == 0x12345678u) { o[g.x % 1024u] = acc.y; } }`;
  const mod = dev.createShaderModule({ code });
  for (const WG of [256, 512]) {
    const pipe = dev.createComputePipeline({ layout: "auto", compute: { module: mod, entryPoint: "main", constants: { WG } } });
    const bg = dev.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: big } }, { binding: 1, resource: { buffer: out } }] });
    const list = [{ kernel: { pipeline: pipe, label: "probe" }, bindGroup: bg, grid: [132 * 16, 1, 1] }];
    await gpuTime(list, 2, 1);
    const per = (await gpuTime(list, 10, 1)) / 10;
    console.log(`read probe WG=${WG}: ${(size / per / 1e9).toFixed(0)} GB/s`);
  }
}
// The decode GEMVs as the engine runs them (fused norm into q|k|v and gate|up, SwiGLU epilogue, residual
// add), f32 x against int8 x at several workgroup sizes.
if (Deno.args.includes("--gemv-probes")) {
  const shapes4: [string, number, number, "act" | "add" | "swiglu", boolean][] = [
    ["qkv", 6144, 2560, "act", true], ["o", 2560, 4096, "add", false], ["gate_up", 19456, 2560, "swiglu", true], ["down", 2560, 9728, "add", false],
  ];
  const xin = buf(9728 * 16), yout = buf(19456 * 16), gam = buf(9728 * 4);
  const base = setMatmulTuning({});
  const variants: [string, Parameters<typeof setMatmulTuning>[0]][] = [
    ["f32-x", { x8: { on: false } }], ["x8 WG=64", { x8: { on: true, WG: 64 } }], ["x8 WG=128", { x8: { on: true, WG: 128 } }],
    ["x8 WG=256", { x8: { on: true, WG: 256 } }], ["x8 WG=512", { x8: { on: true, WG: 512 } }], ["x8 WG=1024", { x8: { on: true, WG: 1024 } }],
  ];
  for (const [name, N, K, out, norm] of shapes4) {
    const sets = Array.from({ length: 6 }, () => qlinear(N, K));
    const bytes = N * K * (0.5 + 4 / 64);
    for (let round = 0; round < 2; round++) {
      for (const [label, t] of variants) {
        setMatmulTuning({ vec: { ...base.vec, ...t.vec }, x8: { ...base.x8, ...t.x8 } });
        await time(`gemv ${name} ${N}x${K} ${label}`, async (ctx) => {
          for (const w of sets) await matmul(ctx, { x: xin, w, y: yout, M: 1, out, mode: "vec", ...(norm ? { norm: { weight: gam, eps: 1e-6 } } : {}) });
        }, 20, bytes * 6, 2 * N * K * 6);
      }
    }
    sets.forEach((l) => l.shards.forEach((s) => [s.w, s.scales!, s.biases!].forEach((b) => b.destroy())));
  }
  setMatmulTuning(base);
  Deno.exit(0);
}
// The dispatch floor: a chain of tiny dependent dispatches (one buffer, read-modify-write: a barrier before
// each) against the same dispatches spread over 64 buffers (a buffer is reused every 64 dispatches).
if (Deno.args.includes("--floor")) {
  const code = `@group(0) @binding(0) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(local_invocation_index) i: u32) { o[i] = o[i] * 3u + 1u; }`;
  const mod = dev.createShaderModule({ code });
  const pipe = dev.createComputePipeline({ layout: "auto", compute: { module: mod, entryPoint: "main" } });
  const bufs = Array.from({ length: 64 }, () => buf(256, false));
  const groups = bufs.map((b) => dev.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: b } }] }));
  for (const [name, n] of [["one buffer", 1], ["64 buffers", 64]] as const) {
    const list = Array.from({ length: 64 }, (_, i) => ({ kernel: { pipeline: pipe, label: "floor" }, bindGroup: groups[i % n], grid: [1, 1, 1] }));
    await gpuTime(list, 2, 1);
    const per = (await gpuTime(list, 40, 1)) / (40 * 64);
    console.log(`dispatch floor, ${name}: ${(per * 1e6).toFixed(2)} us per dispatch`);
  }
  // Streaming reads of one decode GEMV's weight bytes per dispatch (each dispatch reads its own copy, so L2
  // does not hold it), chained: what a GEMV of that size could take if it were only a read.
  const rcode = `@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>; @group(0) @binding(1) var<storage, read_write> o: array<u32>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let stride = n.x * 256u; var acc = vec4<u32>(0u); for (var i = g.x; i < arrayLength(&a); i += stride) { acc ^= a[i]; }
  if (acc.x == 0x12345678u) { o[g.x % 64u] = acc.y; } }`;
  const rpipe = dev.createComputePipeline({ layout: "auto", compute: { module: dev.createShaderModule({ code: rcode }), entryPoint: "main" } });
  for (const [name, mb] of [["o_proj", 5.9], ["qkv", 8.8], ["down", 14.0], ["gate_up", 28.0]] as const) {
    const size = Math.round((mb * 1e6) / 16) * 16;
    const srcs = Array.from({ length: 8 }, () => buf(size, false));
    for (const wgs of [132 * 4, 132 * 8, 132 * 16]) {
      const list = srcs.map((b) => ({ kernel: { pipeline: rpipe, label: "read" }, bindGroup: dev.createBindGroup({ layout: rpipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: b } }, { binding: 1, resource: { buffer: bufs[0] } }] }), grid: [wgs, 1, 1] }));
      await gpuTime(list, 2, 1);
      const per = (await gpuTime(list, 20, 1)) / (20 * 8);
      console.log(`read ${name} ${mb} MB, ${wgs} workgroups: ${(per * 1e6).toFixed(1)} us, ${(size / per / 1e9).toFixed(0)} GB/s`);
    }
    srcs.forEach((b) => b.destroy());
  }
  Deno.exit(0);
}
const H = 2560, I = 9728, D = 128, NQ = 32, NKV = 8;
const x = buf(4096 * 9728 * 2); const y = buf(4096 * 19456 * 2);
const shapes: [string, number, number][] = [["qkv", (NQ + 2 * NKV) * D, H], ["o", H, NQ * D], ["gate_up", 2 * I, H], ["down", H, I], ["lm_head", 16384, H]];
const best: Record<string, string> = {};
let tokenSec = 0;
const SPLIT_SWEEP = Deno.args.includes("--split-sweep");
const FUSED_ONLY = Deno.args.includes("--fused-attn-only") || SPLIT_SWEEP;
const ATTN_ONLY = Deno.args.includes("--attn-only") || FUSED_ONLY;
const TILED_ONLY = Deno.args.includes("--tiled-only");
const VEC_ONLY = Deno.args.includes("--vec-only");
for (const [name, N, K] of ATTN_ONLY ? [] : shapes) {
  const sets = Array.from({ length: 6 }, () => qlinear(N, K)); // cycle weights so L2 does not hold them
  const bytes = N * K * (0.5 + 4 / 64);
  // Q4 vector kernel: T = 0 picks the team from K (~U words per lane, teams may span subgroups); T = 32 is
  // the previous one-subgroup team. NORM: the decode path's fused RMSNorm.
  const gamma = buf(K * 4);
  for (const M of TILED_ONLY ? [] : [1, 4]) {
    let bestPer = 1e9, bestCfg = "";
    const cfgs: [number, number, number, number, boolean, number][] = [];
    for (const PF of [1, 2]) for (const V of [1, 2, 4]) for (const U of [2, 4, 8]) for (const WG of QUICK ? [64] : [64, 256]) cfgs.push([0, U, V, WG, false, PF]);
    cfgs.push([0, 4, 2, 64, true, 1], [0, 4, 2, 64, true, 2]);
    for (const probe of [undefined, "nomath"] as const) for (const [T, U, V, WG, norm, PF] of cfgs) {
      if (QUICK && M === 4 && (WG !== 64 || norm)) continue;
      if (probe && (M !== 1 || V === 1 || norm || WG !== 64 || PF !== 1 || U !== 4)) continue;
      setMatmulTuning({ vec: { T, U, V, PF, R: 1, WG, magic: true, probe }, x8: { on: false } });   // the f32-x kernel's shapes
      const n = norm ? { weight: gamma, eps: 1e-6 } : undefined;
      const per = await time(`vec ${name} ${N}x${K} M=${M} U=${U} V=${V} PF=${PF} WG=${WG} norm=${norm}${probe ? ` probe=${probe}` : ""}`, async (ctx) => { for (const w of sets) await matmul(ctx, { x, w, y, M, out: "act", mode: "vec", norm: n }); }, 20, bytes * 6, 2 * N * K * M * 6);
      if (per < bestPer && !norm && !probe) { bestPer = per; bestCfg = `U=${U} V=${V} PF=${PF} WG=${WG} ${(bytes * 6 / per / 1e9).toFixed(0)} GB/s`; }
    }
    best[`vec ${name} M=${M}`] = bestCfg;
    if (M === 1) tokenSec += bestPer / 6 * (name === "lm_head" ? 1 : 36);
  }
  setMatmulTuning({ vec: { T: 0, U: 8, V: 2, PF: 2, R: 1, WG: 64, magic: true, probe: undefined }, x8: { on: true } });
  setMatmulTuning({ tiled: { TM: 8, wideN: 4096, x8: true, kt2: true, x64: false, x8MinGrid: 256 } });
  if (F32 || VEC_ONLY) continue;
  // The f32 tiled kernel's shapes, and matmul_tiled_x8.wgsl (int8 x, integer dot products).
  const tiledCfgs = [
    [4, 1e9, false, false, false], [8, 1e9, false, false, false], [8, 0, false, false, false], [8, 1e9, true, false, false],
    [8, 0, true, false, false], [8, 1e9, true, true, false], [8, 1e9, true, true, true], [8, 0, true, false, true],
  ] as const;
  for (const M of [512, 2048]) for (const [TM, wideN, x8, kt2, x64] of tiledCfgs) {
    setMatmulTuning({ tiled: { TM, wideN, x8, kt2, x64, x8MinGrid: wideN } });   // int8-x: wide = 0 forces 128 columns, 1e9 forces 64
    const label = x8 ? `int8-x${kt2 ? " kt2" : ""}${x64 ? " x64" : ""}` : `TM=${TM}`;
    const per = await time(`tiled ${name} ${N}x${K} M=${M} ${label} wide=${wideN === 0}`, async (ctx) => { await matmul(ctx, { x, w: sets[0], y, M, out: "act", mode: "tiled" }); }, 10, bytes, 2 * N * K * M);
    const k = `tiled ${name} M=${M}`; const g = 2 * N * K * M / per / 1e9;
    if (!best[k] || g > parseFloat(best[k].split(" ").pop()!)) best[k] = `${label} wide=${wideN === 0} GFLOP/s ${g.toFixed(0)}`;
  }
  setMatmulTuning({ tiled: { TM: 8, wideN: 4096, x8: true, kt2: true, x64: false, x8MinGrid: 256 } });
}
console.log(JSON.stringify(best, null, 1));
console.log(`GEMV-only decode estimate for qwen3-4b (best configs): ${(1 / tokenSec).toFixed(0)} tok/s`);
if (F32 || TILED_ONLY || VEC_ONLY) Deno.exit(0);
// decode attention at depth: one layer's KV, pages contiguous
// Decode attention as the engine runs it (rows up to ropeMaxKv keys with RoPE, Q/K norm and the K/V write
// fused in; longer rows rope.wgsl + the plain kernel) against the plain kernel alone, the fused kernel at
// every length, and the plain kernel with the cache bound writable (as the fused variant has it).
// One layer's KV per length, pages contiguous, buffers sized for the smallest split swept.
for (const len of [128, 1024, 4096, 8192, 16384]) {
  const ps = 16, pages = len / ps;
  const kv = buf(pages * 2 * NKV * ps * D * 2);
  const pt = new Uint32Array(pages).map((_, i) => i); const ptb = buf(pages * 4, false); dev.queue.writeBuffer(ptb, 0, pt);
  const rows = buf(16, false); dev.queue.writeBuffer(rows, 0, new Uint32Array([1, len - 1, 0, 1]));
  const q = buf(NQ * D * 2), qkv = buf((NQ + 2 * NKV) * D * 2), out = buf(NQ * D * 4);
  const invFreq = buf(D / 2 * 4, false); dev.queue.writeBuffer(invFreq, 0, new Float32Array(D / 2).map((_, i) => 1e6 ** (-2 * i / D)));
  const norm = buf(D * 4, false); dev.queue.writeBuffer(norm, 0, new Float32Array(D).fill(1));
  const maxSplit = Math.ceil(len / 32);
  const opart = buf(NQ * maxSplit * D * 4, false), ml = buf(NQ * maxSplit * 8, false);
  const kvBytes = len * NKV * D * 2 * 2;
  const common = { rows, q, pages: ptb, kv, out, row0: 0, D: 1, nq: NQ, nkv: NKV, hd: D, pageSize: ps, maxPages: pages, scale: 0.088, opart, ml, maxSplit };
  const rope = { qkv, invFreq, qNorm: norm, kNorm: norm, rot: D, eps: 1e-6, mscale: 1 };
  const base = setDecodeAttentionTuning({});
  const variants: [string, Parameters<typeof setDecodeAttentionTuning>[0], boolean][] = [
    ["plain", {}, false], ["kvrw", { probe: "kvrw" }, false], ["fused", { ropeMaxKv: Infinity }, true], ["engine", {}, true],
  ];
  // Split and workgroup sweep of the plain kernel (not at 128 or 8192 keys; not at 1024 with --quick).
  if (!FUSED_ONLY && len !== 128 && len !== 8192 && !(QUICK && len === 1024)) {
    for (const [split, wg] of [[256, 128], [128, 128], [64, 128], [256, 256], [128, 256], [64, 256]]) variants.push([`split=${split} wg=${wg}`, { split, wg }, false]);
  }
  // --split-sweep: split sizes of the engine path (fused RoPE where it applies) at every length.
  if (SPLIT_SWEEP) {
    for (const split of [32, 64, 128, 256]) for (const wg of [128, 256]) variants.push([`engine split=${split} wg=${wg}`, { split, wg, ropeWg: wg }, true]);
  }
  for (const [v, t, fused] of variants) {
    setDecodeAttentionTuning({ ...base, ...t });
    await time(`attn decode len=${len} ${v}`, async (ctx) => { await attentionDecode(ctx, { ...common, ...(fused ? { rope } : {}) }); }, 50, kvBytes, 4 * NQ * len * D, len, len);
  }
  setDecodeAttentionTuning(base);
  for (const b of [kv, ptb, rows, q, qkv, out, invFreq, norm, opart, ml]) b.destroy();
}

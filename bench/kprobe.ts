// Lead's scratch kernel timing on real shapes (superseded by bench/bench.ts). Many dispatches per submit.
import { Gpu } from "../src/gpu/device.ts";
import { encodeDispatches, ParamArena } from "../src/gpu/kernel.ts";
import { matmul } from "../src/ops/matmul.ts";
import { attentionDecode } from "../src/ops/attention.ts";
import type { Linear } from "../src/ops/linear.ts";
import { setMatmulTuning } from "../src/ops/matmul.ts";

const F32 = Deno.args.includes("--f32");
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
async function time(label: string, rec: (ctx: any) => Promise<void>, reps: number, bytes: number, flops: number, maxKvLen = 1) {
  const ctx = { gpu, arena: new ParamArena(gpu), list: [] as any[] };
  await rec(ctx);
  ctx.arena.flush();
  const run = async (n: number) => {
    const enc = dev.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (let i = 0; i < n; i++) encodeDispatches(pass, ctx.list, { maxKvLen });
    pass.end();
    dev.queue.submit([enc.finish()]);
    const st = dev.createBuffer({ size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const e2 = dev.createCommandEncoder(); e2.copyBufferToBuffer(ctx.list[0].kernel ? buf(4, false) : buf(4, false), 0, st, 0, 4);
    dev.queue.submit([e2.finish()]);
    await st.mapAsync(GPUMapMode.READ);
  };
  await run(2);
  const t0 = performance.now(); await run(reps); const t1 = performance.now();
  const t2 = performance.now(); await run(1); const t3 = performance.now();
  const per = ((t1 - t0) - (t3 - t2)) / (reps - 1) / 1000;
  console.log(`${label.padEnd(44)} ${(per * 1e6).toFixed(1).padStart(8)} us  ${(bytes / per / 1e9).toFixed(0).padStart(6)} GB/s  ${(flops / per / 1e9).toFixed(0).padStart(7)} GFLOP/s`);
  return per;
}
const H = 2560, I = 9728, D = 128, NQ = 32, NKV = 8;
const x = buf(4096 * 9728 * 2); const y = buf(4096 * 19456 * 2);
const shapes: [string, number, number][] = [["qkv", (NQ + 2 * NKV) * D, H], ["o", H, NQ * D], ["gate_up", 2 * I, H], ["down", H, I], ["lm_head", 16384, H]];
const best: Record<string, string> = {};
let tokenSec = 0;
for (const [name, N, K] of shapes) {
  const sets = Array.from({ length: 6 }, () => qlinear(N, K)); // cycle weights so L2 does not hold them
  const bytes = N * K * (0.5 + 4 / 64);
  for (const M of [1, 4]) {
    let bestPer = 1e9, bestCfg = "";
    for (const magic of [true, false]) for (const T of [8, 16, 32]) for (const U of [1, 2, 4]) for (const WG of [64, 128, 256]) {
      if (T > WG || (M === 4 && WG === 256)) continue;
      setMatmulTuning({ vec: { T, U, WG, magic } });
      const per = await time(`vec ${name} ${N}x${K} M=${M} T=${T} U=${U} WG=${WG} magic=${magic}`, async (ctx) => { for (const w of sets) await matmul(ctx, { x, w, y, M, out: "act", mode: "vec" }); }, 30, bytes * 6, 2 * N * K * M * 6);
      if (per < bestPer) { bestPer = per; bestCfg = `T=${T} U=${U} WG=${WG} magic=${magic} ${(bytes * 6 / per / 1e9).toFixed(0)} GB/s`; }
    }
    best[`vec ${name} M=${M}`] = bestCfg;
    if (M === 1) tokenSec += bestPer / 6 * (name === "lm_head" ? 1 : 36);
  }
  setMatmulTuning({ vec: { T: 0, U: 2, WG: 128, magic: true } });
  if (F32) continue;
  for (const TM of [4, 8]) {
    setMatmulTuning({ tiled: { TM } });
    const per = await time(`tiled ${name} ${N}x${K} M=512 TM=${TM}`, async (ctx) => { await matmul(ctx, { x, w: sets[0], y, M: 512, out: "act", mode: "tiled" }); }, 10, bytes, 2 * N * K * 512);
    const k = `tiled ${name}`; const g = 2 * N * K * 512 / per / 1e9;
    if (!best[k] || g > parseFloat(best[k].split(" ").pop()!)) best[k] = `TM=${TM} GFLOP/s ${g.toFixed(0)}`;
  }
}
console.log(JSON.stringify(best, null, 1));
console.log(`GEMV-only decode estimate for qwen3-4b (best configs): ${(1 / tokenSec).toFixed(0)} tok/s`);
if (F32) Deno.exit(0);
// decode attention at depth: one layer's KV, pages contiguous
for (const len of [1024, 4096, 16384]) {
  const ps = 16, pages = len / ps;
  const kv = buf(pages * 2 * NKV * ps * D * 2);
  const pt = new Uint32Array(pages).map((_, i) => i); const ptb = buf(pages * 4, false); dev.queue.writeBuffer(ptb, 0, pt);
  const rows = buf(16, false); dev.queue.writeBuffer(rows, 0, new Uint32Array([1, len - 1, 0, 1]));
  const q = buf(NQ * D * 2); const out = buf(NQ * D * 2);
  const maxSplit = Math.ceil(len / 256);
  const opart = buf(NQ * maxSplit * D * 4, false), ml = buf(NQ * maxSplit * 8, false);
  const kvBytes = len * NKV * D * 2 * 2;
  await time(`attn decode len=${len}`, async (ctx) => { await attentionDecode(ctx, { rows, q, pages: ptb, kv, out, row0: 0, D: 1, nq: NQ, nkv: NKV, hd: D, pageSize: ps, maxPages: pages, scale: 0.088, opart, ml, maxSplit }); }, 50, kvBytes, 4 * NQ * len * D, len);
}

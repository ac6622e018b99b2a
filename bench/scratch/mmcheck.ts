import { Gpu } from "../../src/gpu/device.ts";
import { encodeDispatches, ParamArena } from "../../src/gpu/kernel.ts";
import { record } from "../../src/ops/context.ts";
import { readBuffer } from "../../src/gpu/readback.ts";
const gpu = await Gpu.create();
const S = 256, d = gpu.device;
const A = new Float32Array(S*S).map(() => Math.random()-0.5), B = new Float32Array(S*S).map(() => Math.random()-0.5);
const mk = (x?: Float32Array) => { const b = d.createBuffer({ size: S*S*4, usage: GPUBufferUsage.STORAGE|GPUBufferUsage.COPY_DST|GPUBufferUsage.COPY_SRC }); if (x) d.queue.writeBuffer(b, 0, x); return b; };
const a = mk(A), b = mk(B);
for (const t of [{ BM: 64, BN: 64, BK: 16, TM: 4, TN: 4 },{ BM: 128, BN: 128, BK: 8, TM: 8, TN: 8 },{ BM: 128, BN: 64, BK: 16, TM: 8, TN: 4 }]) {
  const c = mk(); const arena = new ParamArena(gpu); const ctx = { gpu, arena, list: [] as any[] };
  await record(ctx, { file: "../bench/wgsl/probe_matmul.wgsl", defines: { ...t } }, { buffers: { a, b, c }, params: { M: S, N: S, K: S }, grid: [S / t.BN, S / t.BM, 1] });
  arena.flush(); const enc = d.createCommandEncoder(); const p = enc.beginComputePass(); encodeDispatches(p, ctx.list, { maxKvLen: 0 }); p.end(); d.queue.submit([enc.finish()]);
  const C = new Float32Array(await readBuffer(gpu, c, 0, S*S*4));
  let md = 0; for (const [m, n] of [[0,0],[17,200],[255,255],[100,3],[128,64]]) { let s = 0; for (let k = 0; k < S; k++) s += A[m*S+k]*B[k*S+n]; md = Math.max(md, Math.abs(s - C[m*S+n])); }
  console.log(t, md);
}

/**
 * What the attention kernels' operations cost on this GPU: a kernel per operation (132·8 workgroups of 256
 * lanes, each lane ITER iterations of eight independent chains), timed with timestamp queries. Printed as
 * SM-cycles per warp instruction of the operation (at 1.98 GHz; a vec4 op is four instructions), so the
 * workgroup-memory reads by pattern (one address for all lanes, four per warp as attention_prefill.wgsl's
 * lane groups read, 8, 32 distinct) can be set against shuffles, conversions and FMAs.
 *   ITER=4096 deno run -A bench/experiments/op_costs.ts
 * H200 (session 9): a 16-byte read costs ~4.4 SM-cycles whether 4 or 32 addresses are read (broadcast does
 * not help), an 8-byte one ~3.3, a shuffle of a vec4 4.4, a vec4 FMA 1.7 (bench/NOTES.md #62); session 11: a
 * 16-byte read of a storage buffer that stays in L1 costs ~4.2 however many lanes share a line (#74).
 * @module
 */
import { Gpu } from "../../src/gpu/device.ts";
const gpu = await Gpu.create({ f16: true });
const dev = gpu.device;
const ITER = Number(Deno.env.get("ITER") ?? 2048), WGS = 132 * 8, WG = 256;
const out = dev.createBuffer({ size: WGS * WG * 16, usage: GPUBufferUsage.STORAGE });
const head = `enable f16;\n` +
  `@group(0) @binding(0) var<storage, read_write> o: array<vec4<f32>>;\n` +
  `@group(0) @binding(1) var<storage, read> g: array<vec4<f32>>;\n` +
  `var<workgroup> sm: array<vec4<f32>, 1024>;\nvar<workgroup> sh: array<vec2<f32>, 2048>;\n`;
function kern(body: string, per: string) {
  return head +
    `@compute @workgroup_size(${WG}) fn main(@builtin(local_invocation_index) l: u32, ` +
    `@builtin(workgroup_id) w: vec3<u32>) {
  for (var i = l; i < 1024u; i += ${WG}u) { sm[i] = vec4<f32>(f32(i) * 1e-3); ` +
    `sh[2u*i] = vec2<f32>(f32(i)); sh[2u*i+1u] = vec2<f32>(1.0); }
  workgroupBarrier();
  var a0 = vec4<f32>(f32(l) * 1e-6); var a1 = a0 + 1.0; var a2 = a0 + 2.0; var a3 = a0 + 3.0;
  var a4 = a0 + 4.0; var a5 = a0 + 5.0; var a6 = a0 + 6.0; var a7 = a0 + 7.0;
  let lane = l % 32u;
  ${per}
  for (var i = 0u; i < ${ITER}u; i++) {
    ${body}
  }
  o[w.x * ${WG}u + l] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}`;
}
const lds = (ix: string) =>
  `let b = (i * 37u) & 511u;\n` +
  [0, 1, 2, 3, 4, 5, 6, 7].map((k) => `a${k} += sm[(b + ${k * 40}u + ${ix}) & 1023u];`).join("\n");
const lds64 = (ix: string) =>
  `let b = (i * 37u) & 1023u;\n` +
  [0, 1, 2, 3, 4, 5, 6, 7].map((k) => `a${k} += vec4<f32>(sh[(b + ${k * 80}u + ${ix}) & 2047u], 0.0, 0.0);`)
    .join("\n");
// Reads of a 64 KiB read-only storage buffer (L1 hits after the first pass), 16 bytes per lane; a warp's
// addresses start at a 128-byte line.
const glb = (ix: string) =>
  `let b = ((i * 37u) & 511u) * 8u;\n` +
  [0, 1, 2, 3, 4, 5, 6, 7].map((k) => `a${k} += g[(b + ${k * 40}u + ${ix}) & 4095u];`).join("\n");
const cases: Record<string, [string, string, number]> = {
  // name: [body, per-lane setup, vec4 ops per iteration per lane]
  lds128_same: [lds("0u"), "", 8],
  lds128_4x_pad: [lds("(lane % 4u) * 5u"), "", 8],
  lds128_32distinct: [lds("lane"), "", 8],
  lds128_8x: [lds("(lane % 8u) * 5u"), "", 8],
  lds64_4x: [lds64("(lane % 4u) * 10u"), "", 8],
  g128_same: [glb("0u"), "", 8],
  g128_8x: [glb("lane % 8u"), "", 8],
  g128_32distinct: [glb("lane"), "", 8],
  fadd_only: [
    `let b = f32(i);\n` + [0, 1, 2, 3, 4, 5, 6, 7].map((k) => `a${k} += vec4<f32>(b);`).join("\n"),
    "",
    8,
  ],
  shfl_x4: [[0, 1, 2, 3, 4, 5, 6, 7].map((k) => `a${k} += subgroupShuffleXor(a${k}, 1u);`).join("\n"), "", 8],
  ffma: [
    [0, 1, 2, 3, 4, 5, 6, 7].map((k) => `a${k} = fma(a${k}, vec4<f32>(0.999), vec4<f32>(0.001));`).join("\n"),
    "",
    8,
  ],
  cvt_h2f: [
    `let hv = vec4<f16>(f16(f32(i) * 1e-3));\n` +
    [0, 1, 2, 3, 4, 5, 6, 7].map((k) => `a${k} += vec4<f32>(hv + vec4<f16>(f16(${k})));`).join("\n"),
    "",
    8,
  ],
  unpack: [
    `let u = i * 0x10001u;\n` +
    [0, 1, 2, 3, 4, 5, 6, 7].map((k) =>
      `a${k} += vec4<f32>(unpack2x16float(u + ${k}u), unpack2x16float(u ^ ${k * 3}u));`
    ).join("\n"),
    "",
    8,
  ],
};
const glob = dev.createBuffer({ size: 65536, usage: GPUBufferUsage.STORAGE });
const qs = dev.createQuerySet({ type: "timestamp", count: 2 });
const qb = dev.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
const rb = dev.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
for (const [name, [body, per, ops]] of Object.entries(cases)) {
  const mod = dev.createShaderModule({ code: kern(body, per) });
  const pipe = dev.createComputePipeline({ layout: "auto", compute: { module: mod, entryPoint: "main" } });
  const bg = dev.createBindGroup({
    layout: pipe.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: { buffer: out } },
      ...(body.includes("g[") ? [{ binding: 1, resource: { buffer: glob } }] : []),
    ],
  });
  const ts: number[] = [];
  for (let r = 0; r < 4; r++) {
    const enc = dev.createCommandEncoder();
    const p = enc.beginComputePass({
      timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
    });
    p.setPipeline(pipe);
    p.setBindGroup(0, bg);
    p.dispatchWorkgroups(WGS);
    p.end();
    enc.resolveQuerySet(qs, 0, 2, qb, 0);
    enc.copyBufferToBuffer(qb, 0, rb, 0, 16);
    dev.queue.submit([enc.finish()]);
    await rb.mapAsync(GPUMapMode.READ);
    const t = new BigUint64Array(rb.getMappedRange().slice(0));
    rb.unmap();
    ts.push(Number(t[1] - t[0]) / 1e6);
  }
  const ms = Math.min(...ts.slice(1));
  // warp-instructions (of the op) per SM per ns → cycles per warp-op per SM at 1.98 GHz
  const warpOps = (WGS * WG / 32) * ITER * ops / 132;
  console.log(
    `${name.padEnd(20)} ${ms.toFixed(3)} ms   ${
      (ms * 1e6 * 1.98 / warpOps).toFixed(3)
    } SM-cycles per warp-op`,
  );
}

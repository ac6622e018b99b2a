/**
 * Prefill attention on matrix units through Dawn (`chromium-experimental-subgroup-matrix`, f16 × f16 → f32
 * 16×16×16), before it enters the engine: how fast can q·k and P·V run there? Causal attention of S query
 * rows at positions D .. D+S−1 over keys 0 .. D+S−1, head dim 128, nq query heads over nkv kv heads
 * (contiguous K/V, no pages), in two passes per 64-row query tile so the output never needs rescaling:
 * pass 1 walks the key tiles for each row's max and sum (online, in lanes), pass 2 recomputes S, writes
 * P = exp(s − m) / l as f16 and accumulates P·V in f32 fragments. 1.5× the products of one pass, but no
 * per-row rescale of accumulators (which subgroup matrices cannot do). A workgroup: 4 subgroups of 16 query
 * rows; K and V tiles of 64 keys staged as f16; each S fragment leaves through a 16×16 f32 scratch per
 * subgroup, two lanes a row. Sampled (row, head) outputs are checked against a float64 reference on the same
 * f16 inputs. Time: GPU timestamps around the passes (Dawn's JS-thread stalls, NOTES #117, do not reach
 * them).
 *   deno run -A bench/experiments/sgmat_attention.ts [--rows 2048] [--depths 0,12288] [--iters 5]
 *     [--null]   (Dawn's null backend: Tint's compile only)
 * Compare with the FMA kernel's 13.5 ms (f16 cache) per 4B layer of 2048 rows at depth 12k (NOTES #67).
 * @module
 */
import { parseFlags } from "../../src/cli/args.ts";
import { Gpu } from "../../src/gpu/device.ts";

const f = parseFlags(Deno.args, { rows: "number", depths: "string", iters: "number", null: "boolean" });
const S = f.rows ?? 2048;
const depths = (f.depths ?? "0,12288").split(",").map(Number);
const iters = f.iters ?? 5;
const [NQ, NKV, HD] = [32, 8, 128];
const G = NQ / NKV;
const [BQ, BK, PAD] = [64, 64, 8];
const SA = HD + PAD; // staged K/V row stride (halves)
const SP = BK + PAD; // staged P row stride (halves)
if (S % BQ) throw new Error(`--rows must be a multiple of ${BQ}`);

const J = [...Array(HD / 16).keys()]; // dim fragments
const F = [...Array(BK / 16).keys()]; // key fragments of a tile
// S fragment f of this subgroup's 16 rows: Σ over the dim fragments of q (left) · K rows (right, transposed).
const sFrag = (fi: number) =>
  `var s${fi} = Acc();\n` +
  J.map((j) =>
    `    s${fi} = subgroupMatrixMultiplyAccumulate(qf${j}, subgroupMatrixLoad<Right>(&sk, ${
      fi * 16
    }u * SA + ${j * 16}u, true, SA), s${fi});`
  ).join("\n");
// A tile-staging function: key rows k0 .. k0+63 of one kv head, from the units at `base` of kv, into `dst`.
const stageFn = (name: string, dst: string, base: string) =>
  `fn ${name}(k0: u32, kvh: u32, t: u32, T: u32) {
  for (var i = 0u; i < 8u; i++) {
    let u = t + i * 128u;
    let row = u / 16u;
    let c = u % 16u;
    let v = kv[${base} + (min(k0 + row, T - 1u) * NKV + kvh) * 16u + c];
    let o = row * SA + c * 8u;
    let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
    ${dst}[o] = h0.x; ${dst}[o + 1u] = h0.y; ${dst}[o + 2u] = h1.x; ${dst}[o + 3u] = h1.y;
    ${dst}[o + 4u] = h2.x; ${dst}[o + 5u] = h2.y; ${dst}[o + 6u] = h3.x; ${dst}[o + 7u] = h3.y;
  }
}`;
const code = `enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
struct P { S: u32, D: u32, scale: f32, pad: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<f16>;          // (S, NQ, HD)
@group(0) @binding(2) var<storage, read> kv: array<vec4<u32>>;   // K then V: (T, NKV, HD) each, 8 halves
                                                                 // a unit
@group(0) @binding(3) var<storage, read_write> o: array<f32>;    // (S, NQ, HD)
const NQ = ${NQ}u; const NKV = ${NKV}u; const HD = ${HD}u; const G = ${G}u;
const BK = ${BK}u; const SA = ${SA}u; const SP = ${SP}u;
var<workgroup> sk: array<f16, ${BK * SA}>;
var<workgroup> sv: array<f16, ${BK * SA}>;
var<workgroup> sp: array<f16, ${BQ * SP}>;
var<workgroup> scratch: array<f32, ${4 * 256}>;
alias Left = subgroup_matrix_left<f16, 16, 16>;
alias Right = subgroup_matrix_right<f16, 16, 16>;
alias Acc = subgroup_matrix_result<f32, 16, 16>;

// Key rows k0 .. k0+63 of the kv head's K (V) into the tile: 1024 units of 8 halves, 8 a lane.
${stageFn("stage_k", "sk", "0u")}
${stageFn("stage_v", "sv", "T * NKV * 16u")}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32,
        @builtin(subgroup_id) sid: u32, @builtin(subgroup_invocation_id) lane: u32) {
  let row0 = wid.x * ${BQ}u;      // first query row of the tile
  let h = wid.y;                  // query head
  let kvh = h / G;
  let T = p.D + p.S;
  let r0 = row0 + sid * 16u;        // this subgroup's first row
  let row = lane / 2u;            // the row this lane helps with (two lanes a row) ...
  let half = (lane % 2u) * 8u;    // ... and its 8 columns of each 16×16 fragment
  let qpos = p.D + r0 + row;      // that row's position: keys j ≤ qpos count
  ${
  J.map((j) => `let qf${j} = subgroupMatrixLoad<Left>(&q, (r0 * NQ + h) * HD + ${j * 16}u, false, NQ * HD);`)
    .join("\n  ")
}
  let kend = p.D + row0 + ${BQ}u;   // keys past the tile's last row are masked for every row
  var m = -3.0e38;
  var l = 0.0;
  // Pass 1: each row's max and sum of exp over all its keys.
  for (var k0 = 0u; k0 < kend; k0 += BK) {
    workgroupBarrier();
    stage_k(k0, kvh, t, T);
    workgroupBarrier();
    ${
  F.map((fi) =>
    `{
    ${sFrag(fi)}
    subgroupMatrixStore(&scratch, sid * 256u, s${fi}, false, 16u);
    workgroupBarrier();
    var mx = -3.0e38;
    var e: array<f32, 8>;
    for (var c = 0u; c < 8u; c++) {
      let j = k0 + ${fi * 16}u + half + c;
      e[c] = select(-3.0e38, scratch[sid * 256u + row * 16u + half + c] * p.scale, j <= qpos);
      mx = max(mx, e[c]);
    }
    mx = max(mx, subgroupShuffleXor(mx, 1u));
    let mn = max(m, mx);
    var sum = 0.0;
    for (var c = 0u; c < 8u; c++) { sum += exp(e[c] - mn); }
    sum += subgroupShuffleXor(sum, 1u);
    l = l * exp(m - mn) + sum;
    m = mn;
    workgroupBarrier();
    }`
  ).join("\n    ")
}
  }
  let inv = 1.0 / l;
  ${J.map((j) => `var o${j} = Acc();`).join(" ")}
  // Pass 2: P = exp(s − m) / l as f16, then O += P·V.
  for (var k0 = 0u; k0 < kend; k0 += BK) {
    workgroupBarrier();
    stage_k(k0, kvh, t, T);
    stage_v(k0, kvh, t, T);
    workgroupBarrier();
    ${
  F.map((fi) =>
    `{
    ${sFrag(fi)}
    subgroupMatrixStore(&scratch, sid * 256u, s${fi}, false, 16u);
    workgroupBarrier();
    for (var c = 0u; c < 8u; c++) {
      let j = k0 + ${fi * 16}u + half + c;
      let s = scratch[sid * 256u + row * 16u + half + c] * p.scale;
      sp[(sid * 16u + row) * SP + ${fi * 16}u + half + c] = f16(select(0.0, exp(s - m) * inv, j <= qpos));
    }
    workgroupBarrier();
    }`
  ).join("\n    ")
}
    ${
  F.map((fi) => `let p${fi} = subgroupMatrixLoad<Left>(&sp, sid * 16u * SP + ${fi * 16}u, false, SP);`).join(
    " ",
  )
}
    ${
  J.map((j) =>
    F.map((fi) =>
      `o${j} = subgroupMatrixMultiplyAccumulate(p${fi}, subgroupMatrixLoad<Right>(&sv, ${fi * 16}u * SA + ${
        j * 16
      }u, false, SA), o${j});`
    ).join(" ")
  ).join("\n    ")
}
  }
  ${
  J.map((j) => `subgroupMatrixStore(&o, (r0 * NQ + h) * HD + ${j * 16}u, o${j}, false, NQ * HD);`).join(
    "\n  ",
  )
}
}`;

const gpu = await Gpu.create({ webgpu: "dawn", ...(f.null ? { dawnFlags: ["backend=null"] } : {}) });
const dev = gpu.device;
console.log(`${gpu.info.adapter} (${gpu.info.webgpu}); workgroup memory ${gpu.info.maxWorkgroupStorage} B`);
const module = dev.createShaderModule({ code });
const errs = (await module.getCompilationInfo()).messages.filter((m) => m.type === "error");
if (errs.length) throw new Error(errs.map((m) => `${m.lineNum}: ${m.message}`).join("\n"));
if (f.null) {
  // The null backend offers 16 KiB of workgroup memory (this kernel takes 47 KiB): Tint's check only.
  console.log("compiled");
  Deno.exit(0);
}
const pipe = await dev.createComputePipelineAsync({
  layout: "auto",
  compute: { module, entryPoint: "main" },
});
const U = GPUBufferUsage;
// Inputs: f16 values k/64, k in [−64, 64] (exact in f16), from a hash of the index.
const code16 = (i: number, seed: number) => ((Math.imul(i + seed, 2654435761) >>> 9) % 129) - 64;
const toF16 = (k: number) => {
  if (k === 0) return 0;
  const x = Math.abs(k) / 64, e = Math.floor(Math.log2(x));
  return (k < 0 ? 0x8000 : 0) | ((e + 15) << 10) | Math.round((x / 2 ** e - 1) * 1024);
};
for (const D of depths) {
  const T = D + S;
  const qn = S * NQ * HD, kn = T * NKV * HD;
  const qBuf = dev.createBuffer({ size: qn * 2, usage: U.STORAGE | U.COPY_DST });
  const kvBuf = dev.createBuffer({ size: kn * 4, usage: U.STORAGE | U.COPY_DST });
  const oBuf = dev.createBuffer({ size: qn * 4, usage: U.STORAGE | U.COPY_SRC });
  dev.queue.writeBuffer(qBuf, 0, Uint16Array.from({ length: qn }, (_, i) => toF16(code16(i, 11))));
  dev.queue.writeBuffer(kvBuf, 0, Uint16Array.from({ length: 2 * kn }, (_, i) => toF16(code16(i, 29))));
  const scale = 1 / Math.sqrt(HD);
  const P = dev.createBuffer({ size: 16, usage: U.UNIFORM | U.COPY_DST });
  const pw = new DataView(new ArrayBuffer(16));
  pw.setUint32(0, S, true), pw.setUint32(4, D, true), pw.setFloat32(8, scale, true);
  dev.queue.writeBuffer(P, 0, pw.buffer);
  const bg = dev.createBindGroup({
    layout: pipe.getBindGroupLayout(0),
    entries: [P, qBuf, kvBuf, oBuf].map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  const qs = dev.createQuerySet({ type: "timestamp", count: 2 });
  const res = dev.createBuffer({ size: 16, usage: U.QUERY_RESOLVE | U.COPY_SRC });
  const rb = dev.createBuffer({ size: Math.max(16, qn * 4), usage: U.MAP_READ | U.COPY_DST });
  const run = async (n: number): Promise<number> => {
    const e = dev.createCommandEncoder();
    const pass = e.beginComputePass({
      timestampWrites: { querySet: qs, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
    });
    pass.setPipeline(pipe);
    pass.setBindGroup(0, bg);
    for (let i = 0; i < n; i++) pass.dispatchWorkgroups(S / BQ, NQ);
    pass.end();
    e.resolveQuerySet(qs, 0, 2, res, 0);
    e.copyBufferToBuffer(res, 0, rb, 0, 16);
    dev.queue.submit([e.finish()]);
    await rb.mapAsync(GPUMapMode.READ, 0, 16);
    const ts = new BigUint64Array(rb.getMappedRange(0, 16).slice(0));
    rb.unmap();
    return Number(ts[1] - ts[0]) / 1e6 / n;
  };
  await run(1);
  const ms = Math.min(await run(iters), await run(iters));
  // Sampled rows and heads against float64 on the same f16 values.
  const e = dev.createCommandEncoder();
  e.copyBufferToBuffer(oBuf, 0, rb, 0, qn * 4);
  dev.queue.submit([e.finish()]);
  await rb.mapAsync(GPUMapMode.READ, 0, qn * 4);
  const out = new Float32Array(rb.getMappedRange(0, qn * 4).slice(0));
  rb.unmap();
  let worst = 0;
  for (let s = 0; s < 24; s++) {
    const r = (s * 7919 + 13) % S, h = (s * 31) % NQ, kvh = Math.floor(h / G), pos = D + r;
    const qv = (d: number) => code16((r * NQ + h) * HD + d, 11) / 64;
    const kvAt = (j: number, d: number, which: number) =>
      code16(which * kn + (j * NKV + kvh) * HD + d, 29) / 64;
    const w: number[] = [];
    for (let j = 0; j <= pos; j++) {
      let dot = 0;
      for (let d = 0; d < HD; d++) dot += qv(d) * kvAt(j, d, 0);
      w.push(dot * scale);
    }
    const mx = Math.max(...w);
    const ex = w.map((x) => Math.exp(x - mx));
    const sum = ex.reduce((a, b) => a + b, 0);
    for (let d = 0; d < HD; d += 17) {
      let want = 0;
      for (let j = 0; j <= pos; j++) want += (ex[j] / sum) * kvAt(j, d, 1);
      worst = Math.max(worst, Math.abs(out[(r * NQ + h) * HD + d] - want));
    }
  }
  const keys = S * D + (S * (S + 1)) / 2; // causal (query, key) pairs per head
  const useful = 4 * keys * HD * NQ;
  console.log(
    `S ${S} at depth ${D}: ${ms.toFixed(3)} ms, ${(useful / (ms * 1e-3) / 1e12).toFixed(1)} TFLOP/s useful ` +
      `(${(1.5 * useful / (ms * 1e-3) / 1e12).toFixed(1)} done), worst |error| ${worst.toExponential(2)} ` +
      `over 24 sampled rows`,
  );
}
console.log("errors:", gpu.takeErrors().length);
Deno.exit(0);

/**
 * Matrix units through Dawn (`--webgpu dawn`): an f16 subgroup-matrix GEMM, C[M,N] (f32) = A[M,K]·B[N,K]ᵀ
 * (f16), in two spellings of the same staged kernel (llama.cpp's layout, ../shared/notes/dawn-gemm): the
 * fragments and accumulators in arrays indexed by loop counters (`arrays`), or as named variables in
 * generated code (`unrolled`), since a private array indexed by a variable may live in local memory
 * (bench/NOTES.md #95). Inputs are k/8 (exact in f16, every sum exact in f32): sampled entries of C are
 * checked against the CPU. Timing: `iters` GEMMs in one submit, waited for by a readback (Dawn's is
 * ~0.03 ms).
 *   deno run -A bench/experiments/sgmat_gemm.ts [--sizes 2048,512] [--n 6144] [--k 2560] [--iters 20]
 *     [--cfg 2,4,4,2,32,8]   (subgroups along M, along N, fragments per subgroup along M, N; K tile; pad)
 *     [--double]             (two workgroup buffers: stage the next K tile while this one multiplies,
 *                             one barrier per tile instead of two)
 *     [--staging scalar|fragment|direct]  (how tiles reach the products: lanes copy 16-byte pieces into
 *                             workgroup memory as f16 scalars; each subgroup copies whole fragments with
 *                             subgroupMatrixLoad/Store; or no workgroup memory, fragments read from storage)
 *     [--mfast]              (grid x over M tiles, as the engine's kernel: workgroups in a row share
 *                             the weight's tile)
 *     [--engine [--kernel FILE]]  (the engine's wgsl/matmul_sgmat.wgsl, or a variant of it, instead, one
 *                             split: the same check)
 *     [--null]               (Dawn's null backend: compile only)
 * @module
 */
import { parseFlags } from "../../src/cli/args.ts";
import { Gpu } from "../../src/gpu/device.ts";
import { preprocess } from "../../src/gpu/preprocess.ts";

const f = parseFlags(Deno.args, {
  sizes: "string",
  n: "number",
  k: "number",
  iters: "number",
  cfg: "string",
  double: "boolean",
  staging: "string",
  mfast: "boolean",
  engine: "boolean",
  kernel: "string",
  null: "boolean",
});
const staging = f.staging ?? "scalar";
if (!["scalar", "fragment", "direct"].includes(staging)) throw new Error("--staging scalar|fragment|direct");
const double = f.double ?? false;
const sizes = (f.sizes ?? "2048,512").split(",").map(Number);
const N = f.n ?? 6144;
const K = f.k ?? 2560;
const iters = f.iters ?? 20;
const [SGM, SGN, FM, FN, TK, PAD] = (f.cfg ?? "2,4,4,2,32,8").split(",").map(Number);

function wgsl(unrolled: boolean): { code: string; BM: number; BN: number } {
  const NT = SGM * SGN * 32, BM = SGM * FM * 16, BN = SGN * FN * 16, SA = TK + PAD, CPR = TK / 8;
  const LA = (BM * CPR) / NT, LB = (BN * CPR) / NT;
  if (!Number.isInteger(LA) || !Number.isInteger(LB) || TK % 16 || SA % 8) throw new Error("bad cfg");
  const stage = (dst: string, reg: string, n: number, off = "0u") =>
    Array.from({ length: n }, (_, i) => `
    { let ch = tid + ${i}u * NT; let o = ${off} + (ch / CPR) * SA + (ch % CPR) * 8u; let v = ${reg}${i};
      let h0 = bitcast<vec2<f16>>(v.x); let h1 = bitcast<vec2<f16>>(v.y);
      let h2 = bitcast<vec2<f16>>(v.z); let h3 = bitcast<vec2<f16>>(v.w);
      ${dst}[o] = h0.x; ${dst}[o + 1u] = h0.y; ${dst}[o + 2u] = h1.x; ${dst}[o + 3u] = h1.y;
      ${dst}[o + 4u] = h2.x; ${dst}[o + 5u] = h2.y; ${dst}[o + 6u] = h3.x; ${dst}[o + 7u] = h3.y; }`).join(
      "",
    );
  const fetch = (reg: string, src: string, base: string, n: number, kb: string) =>
    Array.from({ length: n }, (_, i) => `
    { let ch = tid + ${i}u * NT; ${reg}${i} = ${src}[(${base} + ch / CPR) * K8 + ${kb} + ch % CPR]; }`).join(
      "",
    );
  const regs = (r: string, n: number) =>
    Array.from({ length: n }, (_, i) => `var ${r}${i}: vec4<u32>;`).join(" ");
  const I = [...Array(FM).keys()], J = [...Array(FN).keys()];
  const direct = staging === "direct", fragment = staging === "fragment";
  const leftAt = (i: string) =>
    direct
      ? `subgroupMatrixLoad<L>(&a16, (m0 + (sm * FM + ${i}) * 16u) * p.K + kt * TK + kk, false, p.K)`
      : `subgroupMatrixLoad<L>(&sa, oa + (sm * FM + ${i}) * 16u * SA + kk, false, SA)`;
  const rightAt = (j: string) =>
    direct
      ? `subgroupMatrixLoad<R>(&b16, (n0 + (sn * FN + ${j}) * 16u) * p.K + kt * TK + kk, true, p.K)`
      : `subgroupMatrixLoad<R>(&sb, ob + (sn * FN + ${j}) * 16u * SA + kk, true, SA)`;
  // fragment staging: subgroup sid copies fragments sid, sid + NSG, ... of each tile (FPT per row block)
  const NSG = SGM * SGN, FPT = TK / 16, FA = (BM / 16) * FPT / NSG, FB = (BN / 16) * FPT / NSG;
  if (fragment && (!Number.isInteger(FA) || !Number.isInteger(FB))) throw new Error("bad cfg for fragments");
  const fetchF = (reg: string, src: string, base: string, n: number, kt: string) =>
    Array.from({ length: n }, (_, i) => `
    { let f = sid + ${i}u * ${NSG}u;
      ${reg}${i} = subgroupMatrixLoad<L>(&${src},
        (${base} + (f / ${FPT}u) * 16u) * p.K + ${kt} * TK + (f % ${FPT}u) * 16u, false, p.K); }`).join("");
  const stageF = (dst: string, reg: string, n: number) =>
    Array.from({ length: n }, (_, i) => `
    { let f = sid + ${i}u * ${NSG}u;
      subgroupMatrixStore(&${dst}, (f / ${FPT}u) * 16u * SA + (f % ${FPT}u) * 16u, ${reg}${i}, false, SA); }`)
      .join("");
  const body = unrolled
    ? `${
      I.map((i) => `let l${i} = ${leftAt(`${i}u`)};`)
        .join("\n      ")
    }
      ${
      J.map((j) =>
        `{ let r = ${rightAt(`${j}u`)};
        ${
          I.map((i) => `acc${i}_${j} = subgroupMatrixMultiplyAccumulate(l${i}, r, acc${i}_${j});`).join(" ")
        } }`
      ).join("\n      ")
    }`
    : `var lm: array<L, FM>;
      for (var i = 0u; i < FM; i++) {
        lm[i] = ${leftAt("i")};
      }
      for (var j = 0u; j < FN; j++) {
        let r = ${rightAt("j")};
        for (var i = 0u; i < FM; i++) { acc[i][j] = subgroupMatrixMultiplyAccumulate(lm[i], r, acc[i][j]); }
      }`;
  const accDecl = unrolled
    ? I.flatMap((i) => J.map((j) => `var acc${i}_${j} = Acc();`)).join(" ")
    : "var acc: array<array<Acc, FN>, FM>;";
  const store = unrolled
    ? I.flatMap((i) =>
      J.map((j) =>
        `subgroupMatrixStore(&c, (m0 + (sm * FM + ${i}u) * 16u) * p.N + n0 + (sn * FN + ${j}u) * 16u,
          acc${i}_${j}, false, p.N);`
      )
    ).join("\n  ")
    : `for (var i = 0u; i < FM; i++) { for (var j = 0u; j < FN; j++) {
    subgroupMatrixStore(&c, (m0 + (sm * FM + i) * 16u) * p.N + n0 + (sn * FN + j) * 16u, acc[i][j], false,
      p.N);
  } }`;
  const code = `enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);
struct P { M: u32, N: u32, K: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: P;
${
    staging === "scalar"
      ? `@group(0) @binding(1) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<u32>>;`
      : `@group(0) @binding(1) var<storage, read> a16: array<f16>;
@group(0) @binding(2) var<storage, read> b16: array<f16>;`
  }
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
const NT = ${NT}u; const SA = ${SA}u; const CPR = ${CPR}u; const TK = ${TK}u;
const FM = ${FM}u; const FN = ${FN}u; const SGM = ${SGM}u;
${
    direct ? "" : `var<workgroup> sa: array<f16, ${(double ? 2 : 1) * BM * SA}>;
var<workgroup> sb: array<f16, ${(double ? 2 : 1) * BN * SA}>;`
  }
alias L = subgroup_matrix_left<f16, 16, 16>;
alias R = subgroup_matrix_right<f16, 16, 16>;
alias Acc = subgroup_matrix_result<f32, 16, 16>;
@compute @workgroup_size(${NT})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        @builtin(subgroup_id) sid: u32) {
  let m0 = ${f.mfast ? "wid.x" : "wid.y"} * ${BM}u;
  let n0 = ${f.mfast ? "wid.y" : "wid.x"} * ${BN}u;
  let sm = sid % SGM;
  let sn = sid / SGM;
  let K8 = p.K / 8u;
  let nk = p.K / TK;
  ${accDecl}
  ${
    direct
      ? `for (var kt = 0u; kt < nk; kt++) {
    for (var kk = 0u; kk < TK; kk += 16u) {
      ${body}
    }
  }`
      : fragment
      ? `${Array.from({ length: FA }, (_, i) => `var fa${i}: L;`).join(" ")}
  ${Array.from({ length: FB }, (_, i) => `var fb${i}: L;`).join(" ")}
  ${fetchF("fa", "a16", "m0", FA, "0u")}
  ${fetchF("fb", "b16", "n0", FB, "0u")}
  for (var kt = 0u; kt < nk; kt++) {
    workgroupBarrier();
    ${stageF("sa", "fa", FA)}
    ${stageF("sb", "fb", FB)}
    workgroupBarrier();
    if (kt + 1u < nk) {
      ${fetchF("fa", "a16", "m0", FA, "(kt + 1u)")}
      ${fetchF("fb", "b16", "n0", FB, "(kt + 1u)")}
    }
    let oa = 0u;
    let ob = 0u;
    for (var kk = 0u; kk < TK; kk += 16u) {
      ${body}
    }
  }`
      : `${regs("ra", LA)} ${regs("rb", LB)}
  ${fetch("ra", "a", "m0", LA, "0u")}
  ${fetch("rb", "b", "n0", LB, "0u")}
  ${
        double
          ? `${stage("sa", "ra", LA)}
  ${stage("sb", "rb", LB)}
  workgroupBarrier();
  if (nk > 1u) {
    ${fetch("ra", "a", "m0", LA, "CPR")}
    ${fetch("rb", "b", "n0", LB, "CPR")}
  }
  for (var kt = 0u; kt < nk; kt++) {
    let oa = (kt % 2u) * ${BM * SA}u;
    let ob = (kt % 2u) * ${BN * SA}u;
    for (var kk = 0u; kk < TK; kk += 16u) {
      ${body}
    }
    if (kt + 1u < nk) {
      ${stage("sa", "ra", LA, `${BM * SA}u - oa`)}
      ${stage("sb", "rb", LB, `${BN * SA}u - ob`)}
      if (kt + 2u < nk) {
        let kb = (kt + 2u) * CPR;
        ${fetch("ra", "a", "m0", LA, "kb")}
        ${fetch("rb", "b", "n0", LB, "kb")}
      }
    }
    workgroupBarrier();
  }`
          : `for (var kt = 0u; kt < nk; kt++) {
    workgroupBarrier();
    ${stage("sa", "ra", LA)}
    ${stage("sb", "rb", LB)}
    workgroupBarrier();
    if (kt + 1u < nk) {
      let kb = (kt + 1u) * CPR;
      ${fetch("ra", "a", "m0", LA, "kb")}
      ${fetch("rb", "b", "n0", LB, "kb")}
    }
    let oa = 0u;
    let ob = 0u;
    for (var kk = 0u; kk < TK; kk += 16u) {
      ${body}
    }
  }`
      }`
  }
  ${store}
}`;
  return { code, BM, BN };
}

// --null: Dawn's null backend, a compile check without a GPU (the timings and checks mean nothing there).
const gpu = await Gpu.create({ webgpu: "dawn", ...(f.null ? { dawnFlags: ["backend=null"] } : {}) });
const dev = gpu.device;
console.log(`${gpu.info.adapter} (${gpu.info.webgpu}); matrix configs ${gpu.info.subgroupMatrix.length}`);
const U = GPUBufferUsage;
const F16 = Array.from({ length: 17 }, (_, j) => {
  const x = (j - 8) / 8;
  if (x === 0) return 0;
  const s = x < 0 ? 0x8000 : 0, ax = Math.abs(x), e = Math.floor(Math.log2(ax));
  return s | ((e + 15) << 10) | Math.round((ax / 2 ** e - 1) * 1024);
});
const codeOf = (i: number, seed: number) => ((Math.imul(i + seed, 2654435761) >>> 7) % 17) >>> 0;
const Mmax = Math.max(...sizes);
const aCodes = new Uint8Array(Mmax * K).map((_, i) => codeOf(i, 11));
const bCodes = new Uint8Array(N * K).map((_, i) => codeOf(i, 29));
const upload = (codes: Uint8Array) => {
  const buf = dev.createBuffer({ size: codes.length * 2, usage: U.STORAGE | U.COPY_DST });
  dev.queue.writeBuffer(buf, 0, Uint16Array.from(codes, (c) => F16[c]));
  return buf;
};
const A = upload(aCodes), B = upload(bCodes);
const C = dev.createBuffer({ size: Mmax * N * 4, usage: U.STORAGE | U.COPY_SRC });
const rb = dev.createBuffer({ size: Mmax * N * 4, usage: U.MAP_READ | U.COPY_DST });
// The engine's kernel: params (K, kc, mp, ldp), a@1, b@2, part@3 (f32 tiles); grid x over M tiles.
const engineCode = () => {
  const read = (n: string) => Deno.readTextFileSync(new URL(`../../wgsl/${n}`, import.meta.url));
  const defs = { F16: 1, SUBGROUPS: 1, SUBGROUPS_DIRECTIVE: 1 };
  const main = f.kernel ? Deno.readTextFileSync(f.kernel) : read("matmul_sgmat.wgsl");
  return { code: preprocess(main, defs, read, "matmul_sgmat.wgsl"), BM: 128, BN: 128 };
};
for (const unrolled of f.engine ? [true, true] : [false, true, false, true]) {
  const { code, BM, BN } = f.engine ? engineCode() : wgsl(unrolled);
  const module = dev.createShaderModule({ code });
  const msgs = (await module.getCompilationInfo()).messages.filter((m) => m.type === "error");
  if (msgs.length) throw new Error(msgs.map((m) => `${m.lineNum}: ${m.message}`).join("\n"));
  const pipe = await dev.createComputePipelineAsync({
    layout: "auto",
    compute: { module, entryPoint: "main" },
  });
  for (const M of sizes) {
    const P = dev.createBuffer({ size: 32, usage: U.UNIFORM | U.COPY_DST });
    dev.queue.writeBuffer(P, 0, new Uint32Array(f.engine ? [K, K, M, N, 0, 0, 0, 0] : [M, N, K, 0]));
    const bg = dev.createBindGroup({
      layout: pipe.getBindGroupLayout(0),
      entries: [P, A, B, C].map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
    const run = async (n: number) => {
      const e = dev.createCommandEncoder();
      for (let i = 0; i < n; i++) {
        const pass = e.beginComputePass();
        pass.setPipeline(pipe);
        pass.setBindGroup(0, bg);
        if (f.mfast || f.engine) pass.dispatchWorkgroups(M / BM, N / BN);
        else pass.dispatchWorkgroups(N / BN, M / BM);
        pass.end();
      }
      e.copyBufferToBuffer(C, 0, rb, 0, 16);
      dev.queue.submit([e.finish()]);
      await rb.mapAsync(GPUMapMode.READ, 0, 16);
      rb.unmap();
    };
    await run(2);
    const t = performance.now();
    await run(iters);
    const ms = (performance.now() - t) / iters;
    // Check sampled entries against the CPU (exact).
    const e = dev.createCommandEncoder();
    e.copyBufferToBuffer(C, 0, rb, 0, M * N * 4);
    dev.queue.submit([e.finish()]);
    await rb.mapAsync(GPUMapMode.READ, 0, M * N * 4);
    const c = new Float32Array(rb.getMappedRange(0, M * N * 4).slice(0));
    rb.unmap();
    let bad = 0;
    for (let s = 0; s < 200; s++) {
      const m = (s * 7919) % M, n = (s * 104729) % N;
      let want = 0;
      for (let k = 0; k < K; k++) want += ((aCodes[m * K + k] - 8) / 8) * ((bCodes[n * K + k] - 8) / 8);
      if (c[m * N + n] !== want) bad++;
    }
    const tflops = (2 * M * N * K) / (ms * 1e-3) / 1e12;
    console.log(
      `${f.engine ? "engine  " : unrolled ? "unrolled" : "arrays  "} ${M}x${N}x${K}: ${ms.toFixed(3)} ms, ${
        tflops.toFixed(1)
      } TFLOP/s, ` +
        `${bad}/200 wrong`,
    );
  }
}
console.log("errors:", gpu.takeErrors().length);
Deno.exit(0);

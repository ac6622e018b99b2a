/**
 * Dry run of the tuned host wrappers (matmul, decode and prefill attention, rope) on simulated devices
 * (H200-like, lavapipe-like, browser-like without subgroups, f32, varying and 64-lane subgroups): records
 * every kernel they would build (file, defines, overrides), the packed params bytes, the bound buffer
 * names, the grids at several KV lengths, and the preprocessed source with comments and blank space
 * stripped. Nothing is compiled or run, so shapes of GPUs not present here are checked too. A refactor
 * that must not change any kernel leaves the output the same (up to renamed defines and identifiers).
 *
 *   deno run -A bench/experiments/kernel_specs.ts > specs.json
 */
import { WgslReflect } from "wgsl_reflect/wgsl_reflect.module.js";
import type { GpuInfo } from "../../src/gpu/device.ts";
import { Kernel, type KernelSpec } from "../../src/gpu/kernel.ts";
import { preprocess } from "../../src/gpu/preprocess.ts";
import { defaultProfile } from "../../src/gpu/profile.ts";
import { attentionDecode, attentionPrefill } from "../../src/ops/attention.ts";
import type { OpContext } from "../../src/ops/context.ts";
import type { Linear, WeightFormat } from "../../src/ops/linear.ts";
import { matmul } from "../../src/ops/matmul.ts";
import { rope } from "../../src/ops/rope.ts";
import { shaderSource } from "../../src/platform/mod.ts";

const base: GpuInfo = {
  adapter: "sim",
  webgpu: "deno",
  subgroupMatrix: [],
  f16: true,
  subgroups: true,
  subgroupMinSize: 32,
  subgroupMaxSize: 32,
  timestamps: true,
  maxBinding: 2 ** 31 - 1,
  maxBuffer: 2 ** 40,
  maxWorkgroupStorage: 49152,
  maxStorageBuffers: 32,
  maxInvocations: 1024,
  uniformAlign: 256,
  storageAlign: 256,
  int8Dot: true,
};
const devices: Record<string, GpuInfo> = {
  h200: base,
  lavapipe: { ...base, subgroupMinSize: 8, subgroupMaxSize: 8, maxWorkgroupStorage: 32768 },
  browser: {
    ...base,
    subgroups: false,
    subgroupMinSize: 0,
    subgroupMaxSize: 0,
    maxWorkgroupStorage: 16384,
    maxStorageBuffers: 10,
    maxInvocations: 256,
    int8Dot: false,
  },
  f32: {
    ...base,
    f16: false,
    subgroups: false,
    subgroupMinSize: 0,
    subgroupMaxSize: 0,
    maxWorkgroupStorage: 32768,
  },
  varying: { ...base, subgroupMinSize: 8, subgroupMaxSize: 32, maxWorkgroupStorage: 32768 },
  wave64: { ...base, subgroupMinSize: 64, subgroupMaxSize: 64, maxWorkgroupStorage: 65536 },
};

const entries: unknown[] = [];
const sources: Record<string, string> = {};

async function hash(s: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, 16);
}

/**
 * The module-scope items reachable from `main` (declaration order does not matter in WGSL), comments and
 * blank space stripped, sorted: two sources that differ only in dead code, comments or order give the same.
 */
function closure(code: string): string {
  const src = code.replace(/\/\/.*$/gm, "");
  const items: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of src) {
    cur += ch;
    if (ch === "{") depth++;
    else if (ch === "}" && --depth === 0) (items.push(cur), cur = "");
    else if (ch === ";" && depth === 0) (items.push(cur), cur = "");
  }
  items.push(cur);
  const norm = items.map((t) => t.replace(/\s+/g, " ").trim()).filter((t) => t && t !== ";");
  const nameOf = (t: string) =>
    /^(?:@[\w]+(?:\([^)]*\))?\s*)*(?:fn|struct|alias|const|override|var(?:<[^>]*>)?)\s+(\w+)/.exec(t)?.[1];
  const byName = new Map<string, string>();
  for (const t of norm) {
    const n = nameOf(t);
    if (n) byName.set(n, t);
  }
  const keep = new Set<string>(norm.filter((t) => !nameOf(t)));
  const todo = [byName.get("main")!];
  while (todo.length) {
    const t = todo.pop()!;
    if (keep.has(t) && t !== byName.get("main")) continue;
    keep.add(t);
    for (const w of t.match(/\b[A-Za-z_]\w*\b/g) ?? []) {
      const d = byName.get(w);
      if (d && !keep.has(d)) todo.push(d);
    }
  }
  return [...keep].sort().join("\n");
}

const KV_LENS = [1, 17, 256, 257, 600, 4608, 4609, 8192, 8193, 16384, 20000];

function context(device: string, info: GpuInfo, op: string): OpContext {
  const gdefines: Record<string, number> = {};
  if (info.f16) gdefines.F16 = 1;
  if (info.subgroups) gdefines.SUBGROUPS = 1;
  let pending: { spec: KernelSpec; defines: Record<string, unknown>; hash: string } | null = null;
  const gpu = {
    info,
    profile: defaultProfile(info),
    defines: gdefines,
    device: {
      createBindGroup: (d: GPUBindGroupDescriptor) => ({
        names: [...(d.entries as GPUBindGroupEntry[])].map((e) => e.binding),
      }),
    },
    kernels: {
      get: async (spec: KernelSpec) => {
        const defines = { ...gdefines, ...spec.defines };
        const top = await shaderSource(spec.file);
        const inc = new Map<string, string>();
        for (const m of top.matchAll(/#include\s+"([^"]+)"/g)) inc.set(m[1], await shaderSource(m[1]));
        const code = preprocess(top, defines, (n) => inc.get(n)!, spec.file);
        const norm = closure(code);
        const h = await hash(norm);
        sources[h] = norm;
        pending = { spec, defines, hash: h };
        const refl = new WgslReflect(code);
        const bindings = new Map<string, { binding: number; uniform: boolean }>();
        let params = null;
        for (const u of refl.uniforms) {
          bindings.set(u.name, { binding: u.binding, uniform: true });
          if (u.name === "params") {
            const members = new Map<string, { offset: number; type: string }>();
            for (const m of (u as any).members ?? []) {
              members.set(m.name, { offset: m.offset, type: m.type.name });
            }
            params = { size: u.size, members };
          }
        }
        for (const s of refl.storage) bindings.set(s.name, { binding: s.binding, uniform: false });
        return new Kernel(spec.file, { getBindGroupLayout: () => ({}) } as any, bindings, params, code);
      },
    },
  };
  const arena = {
    alloc: (size: number) => {
      const bytes = new Uint8Array(size);
      paramBytes.push(bytes);
      return { binding: {}, view: new DataView(bytes.buffer) };
    },
  };
  const paramBytes: Uint8Array[] = [];
  const list: any[] = [];
  const ctx = {
    gpu,
    arena,
    list: {
      push: (d: any) => {
        const p = pending!;
        const grid = typeof d.grid === "function"
          ? KV_LENS.map((m) => d.grid({ maxKvLen: m, minKvLen: 0 }).join("x")).join(" ")
          : d.grid.join("x");
        const bound = p.spec.file; // buffer names come from the kernel's bindings, checked by makeDispatch
        entries.push({
          device,
          op,
          file: bound,
          defines: Object.keys(p.defines).sort().map((k) => `${k}=${p.defines[k]}`),
          overrides: p.spec.overrides ?? {},
          grid,
          params: paramBytes.length ? [...paramBytes[paramBytes.length - 1]].join(",") : "",
          source: p.hash,
        });
        paramBytes.length = 0;
        list.push(d);
        return list.length;
      },
    },
  };
  return ctx as unknown as OpContext;
}

/** A stub buffer: only its size is read (split-K scratch). */
const buf = (size = 2 ** 40) => ({ size, label: "stub" }) as unknown as GPUBuffer;

interface Model {
  name: string;
  hidden: number;
  nq: number;
  nkv: number;
  hd: number;
  inter: number;
  vocab: number;
  /** Attention only (its matmuls would have K below one quantization unit). */
  attnOnly?: boolean;
}
const models: Model[] = [
  { name: "4b", hidden: 2560, nq: 32, nkv: 8, hd: 128, inter: 9728, vocab: 151936 },
  { name: "19m", hidden: 384, nq: 6, nkv: 2, hd: 64, inter: 1024, vocab: 16384 },
  { name: "8b", hidden: 4096, nq: 32, nkv: 8, hd: 128, inter: 12288, vocab: 151936 },
  { name: "hd32", hidden: 256, nq: 8, nkv: 8, hd: 32, inter: 512, vocab: 1000 },
  { name: "hd256", hidden: 1024, nq: 8, nkv: 2, hd: 256, inter: 2048, vocab: 1000 },
  { name: "hd16", hidden: 64, nq: 4, nkv: 2, hd: 16, inter: 128, vocab: 1000, attnOnly: true },
  { name: "hd8", hidden: 64, nq: 2, nkv: 1, hd: 8, inter: 128, vocab: 1000, attnOnly: true },
];
const formats: [string, WeightFormat][] = [
  ["q4g64", { kind: "q", bits: 4, groupSize: 64, scaleF16: false }],
  ["q4g32h", { kind: "q", bits: 4, groupSize: 32, scaleF16: true }],
  ["q8g64", { kind: "q", bits: 8, groupSize: 64, scaleF16: false }],
  ["f16", { kind: "f16" }],
  ["bf16", { kind: "bf16" }],
];

function linear(name: string, N: number, K: number, format: WeightFormat): Linear {
  const q = format.kind === "q";
  return {
    name,
    N,
    K,
    format,
    shards: [{ n0: 0, n: N, w: buf(), ...(q ? { scales: buf(), biases: buf() } : {}) }],
  };
}

for (const [device, info] of Object.entries(devices)) {
  for (const m of models) {
    const mats: [string, number, number][] = [
      ["qkv", (m.nq + 2 * m.nkv) * m.hd, m.hidden],
      ["o", m.hidden, m.nq * m.hd],
      ["gu", 2 * m.inter, m.hidden],
      ["down", m.hidden, m.inter],
      ["head", m.vocab, m.hidden],
    ];
    for (const [fname, format] of m.attnOnly ? [] : formats) {
      for (const [wname, N, K] of mats) {
        const w = linear(wname, N, K, format);
        const op = `${m.name}/${fname}/${wname}`;
        const ctx = context(device, info, op);
        for (const M of [1, 4]) {
          for (const out of ["act", "add", "f32"] as const) {
            await matmul(ctx, { x: buf(), w, y: buf(), M, out, mode: "vec" });
          }
          await matmul(ctx, {
            x: buf(),
            w,
            y: buf(),
            M,
            out: "act",
            mode: "vec",
            norm: { weight: buf(), eps: 1e-6 },
          });
          if (wname === "gu" && format.kind === "q" && format.bits === 4) {
            await matmul(ctx, {
              x: buf(),
              w,
              y: buf(),
              M,
              out: "swiglu",
              mode: "vec",
              norm: { weight: buf(), eps: 1e-6 },
            });
          }
        }
        for (const M of [13, 512, 2048]) {
          for (const rows of [512, 2048, 8192]) {
            if (rows < M) continue;
            const splitK = { buffer: buf(2 * rows * m.hidden * 4), rows };
            await matmul(ctx, {
              x: buf(),
              w,
              y: buf(),
              M,
              out: wname === "o" || wname === "down" ? "add" : "act",
              mode: "tiled",
              splitK,
              row0: 3,
              ldy: N + 64,
              nOff: 32,
            });
          }
          await matmul(ctx, { x: buf(), w, y: buf(), M, out: "f32", mode: "tiled", f32x: true });
        }
      }
    }
    for (const q8 of [false, true]) {
      const op = `${m.name}/attn/${q8 ? "q8" : "act"}`;
      const ctx = context(device, info, op);
      const common = {
        rows: buf(),
        q: buf(),
        pages: buf(),
        kv: buf(),
        ...(q8 ? { kvScale: buf() } : {}),
        out: buf(),
        nq: m.nq,
        nkv: m.nkv,
        hd: m.hd,
        pageSize: 16,
        maxPages: 2048,
        scale: 1 / Math.sqrt(m.hd),
      };
      for (const qn of [false, true]) {
        const rp = {
          qkv: buf(),
          invFreq: buf(),
          ...(qn ? { qNorm: buf(), kNorm: buf() } : {}),
          rot: m.hd,
          eps: 1e-6,
          mscale: 1,
        };
        for (const D of [1, 8]) {
          await attentionDecode(ctx, {
            ...common,
            row0: 0,
            D,
            rope: rp,
            opart: buf(),
            ml: buf(),
            maxSplit: 128,
          });
          await rope(ctx, { ...common, ...rp, R: 512, row0: D });
        }
      }
      await attentionDecode(ctx, { ...common, row0: 0, D: 2, opart: buf(), ml: buf(), maxSplit: 128 });
      for (const S of [1, 13, 512, 2048]) await attentionPrefill(ctx, { ...common, row0: 5, S });
    }
  }
}

console.log(JSON.stringify({ entries, sources }));

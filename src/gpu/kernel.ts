/**
 * The one pipeline cache. A kernel is keyed by (file, defines, overrides); its variant name is the label of
 * every GPU object made from it. Bindings and the `Params` uniform layout are read from the preprocessed
 * WGSL with wgsl_reflect, so host wrappers bind buffers and pack params by name, never by index or offset.
 * @module
 */
import { WgslReflect } from "wgsl_reflect/wgsl_reflect.module.js";
import { DeviceError, ShapeError } from "../errors.ts";
import { shaderSource } from "../platform/mod.ts";
import type { Gpu } from "./device.ts";
import { type Defines, preprocess } from "./preprocess.ts";

export interface KernelSpec {
  /** File in wgsl/, e.g. "rms_norm.wgsl". */
  file: string;
  /** Preprocessor defines (merged over the device-wide ones: F16, SUBGROUPS). */
  defines?: Defines;
  /** WGSL `override` constants: workgroup and tile sizes. */
  overrides?: Record<string, number>;
  entry?: string;
}

interface ParamLayout {
  size: number;
  members: Map<string, { offset: number; type: string }>;
}

/** A compiled pipeline plus what reflection found in its source. */
export class Kernel {
  constructor(
    readonly label: string,
    readonly pipeline: GPUComputePipeline,
    readonly bindings: Map<string, { binding: number; uniform: boolean }>,
    readonly params: ParamLayout | null,
    readonly source: string,
  ) {}

  #layout: GPUBindGroupLayout | null = null;
  /**
   * The pipeline's bind group layout, asked for once: on Dawn every `getBindGroupLayout` call makes a new
   * addon object, and each one collected costs Deno's N-API time proportional to the live ones (#117).
   */
  get layout(): GPUBindGroupLayout {
    return this.#layout ??= this.pipeline.getBindGroupLayout(0);
  }
}

export type BufferResource = GPUBuffer | { buffer: GPUBuffer; offset?: number; size?: number };
export type Grid = readonly [number, number, number];

/** One recorded dispatch: encoded as setPipeline/setBindGroup/dispatchWorkgroups. */
export interface Dispatch {
  kernel: Kernel;
  bindGroup: GPUBindGroup;
  /** Fixed grid, or one computed at encode time from the step (e.g. attention splits from the KV length). */
  grid: Grid | ((step: StepShape) => Grid);
}

/** What a grid function may depend on: known on the CPU without reading the GPU. */
export interface StepShape {
  /** Largest KV length (position + 1) of any row in this step. */
  maxKvLen: number;
  /** Smallest KV length of the step's running decode rows, when known (0: unknown). */
  minKvLen?: number;
}

export class KernelCache {
  #pipelines = new Map<string, Promise<Kernel>>();
  constructor(readonly gpu: Gpu) {}

  /** The kernel for this spec, compiled once. */
  get(spec: KernelSpec): Promise<Kernel> {
    const defines = { ...this.gpu.defines, ...spec.defines };
    const key = kernelKey(spec.file, defines, spec.overrides ?? {});
    let k = this.#pipelines.get(key);
    if (!k) {
      k = this.#compile(spec, defines, key);
      this.#pipelines.set(key, k);
      k.catch(() => this.#pipelines.delete(key));
    }
    return k;
  }

  /** Every kernel compiled so far (a Tint check compiles them again on Dawn; tests). */
  async compiled(): Promise<Kernel[]> {
    const all = await Promise.allSettled([...this.#pipelines.values()]);
    return all.flatMap((r) => r.status === "fulfilled" ? [r.value] : []);
  }

  /** Forgets compiled variants of one file (kernel lab, after editing its source). */
  invalidate(file: string): void {
    for (const key of [...this.#pipelines.keys()]) {
      if (key.startsWith(file.replace(/\.wgsl$/, ""))) this.#pipelines.delete(key);
    }
  }

  async #compile(spec: KernelSpec, defines: Defines, label: string): Promise<Kernel> {
    const includes = new Map<string, string>();
    const top = await shaderSource(spec.file);
    for (const name of top.matchAll(/#include\s+"([^"]+)"/g)) {
      includes.set(name[1], await shaderSource(name[1]));
    }
    const code = preprocess(top, defines, (n) => {
      const t = includes.get(n);
      if (t === undefined) {
        throw new Error(`${spec.file}: include ${n} not found (nested includes are not supported)`);
      }
      return t;
    }, spec.file);
    const device = this.gpu.device;
    // An error scope keeps a bad shader (kernel lab edits) from surfacing as an uncaptured device error.
    device.pushErrorScope("validation");
    const module = device.createShaderModule({ label, code });
    let pipeline: GPUComputePipeline | null = null;
    let failure = "";
    try {
      pipeline = await device.createComputePipelineAsync({
        label,
        layout: "auto",
        compute: { module, entryPoint: spec.entry ?? "main", constants: spec.overrides },
      });
    } catch (e) {
      failure = (e as Error).message;
    }
    const scoped = await device.popErrorScope();
    if (!pipeline || scoped) {
      throw new DeviceError(`kernel ${label} failed to compile: ${scoped?.message ?? failure}`);
    }
    const refl = reflect(code);
    const bindings = new Map<string, { binding: number; uniform: boolean }>();
    let params: ParamLayout | null = null;
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
    return new Kernel(label, pipeline, bindings, params, code);
  }
}

function kernelKey(file: string, defines: Defines, overrides: Record<string, number>): string {
  const d = Object.keys(defines).sort().map((
    k,
  ) => (defines[k] === 1 || defines[k] === true ? k : `${k}=${defines[k]}`));
  const o = Object.keys(overrides).sort().map((k) => `${k}=${overrides[k]}`);
  return [file.replace(/\.wgsl$/, ""), ...d, ...o].join("_");
}

/**
 * Uniform memory for many dispatches' `Params`, carved from a few large buffers and uploaded once. A plan
 * (one step shape) owns one arena, so its params are written when the plan is built, not per step.
 */
export class ParamArena {
  static readonly CHUNK = 64 * 1024;
  #chunks: { buffer: GPUBuffer; data: Uint8Array; used: number }[] = [];
  constructor(readonly gpu: Gpu) {}

  /** Reserves an aligned slot of `size` bytes; returns the binding and a view to fill. */
  alloc(size: number): { binding: GPUBufferBinding; view: DataView } {
    const align = Math.max(this.gpu.info.uniformAlign, 16);
    const padded = Math.ceil(size / 16) * 16;
    let c = this.#chunks[this.#chunks.length - 1];
    if (!c || c.used + padded > ParamArena.CHUNK) {
      const buffer = this.gpu.memory.create("params", {
        label: "params",
        size: ParamArena.CHUNK,
        usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
      });
      c = { buffer, data: new Uint8Array(ParamArena.CHUNK), used: 0 };
      this.#chunks.push(c);
    }
    const offset = c.used;
    c.used = Math.ceil((offset + padded) / align) * align;
    return {
      binding: { buffer: c.buffer, offset, size: padded },
      view: new DataView(c.data.buffer, offset, padded),
    };
  }

  /** Uploads every chunk (call after the plan is built, before its first use). */
  flush(): void {
    for (const c of this.#chunks) this.gpu.device.queue.writeBuffer(c.buffer, 0, c.data, 0, c.used);
  }

  destroy(): void {
    for (const c of this.#chunks) this.gpu.memory.destroy(c.buffer);
    this.#chunks = [];
  }
}

/**
 * Builds one dispatch: binds `buffers` by WGSL variable name and packs `params` into the kernel's `Params`
 * struct (every member must be given; units are on the WGSL fields).
 */
export function makeDispatch(
  gpu: Gpu,
  kernel: Kernel,
  arena: ParamArena,
  opts: { buffers: Record<string, BufferResource>; params?: Record<string, number>; grid: Dispatch["grid"] },
): Dispatch {
  const entries: GPUBindGroupEntry[] = [];
  for (const [name, b] of kernel.bindings) {
    if (name === "params") continue;
    const r = opts.buffers[name];
    if (!r) throw new ShapeError(`${kernel.label}: no buffer given for binding "${name}"`);
    entries.push({ binding: b.binding, resource: r instanceof GPUBuffer ? { buffer: r } : r });
  }
  const pb = kernel.bindings.get("params");
  if (pb && kernel.params) {
    const { binding, view } = arena.alloc(kernel.params.size);
    packParams(kernel, view, opts.params ?? {});
    entries.push({ binding: pb.binding, resource: binding });
  }
  const bindGroup = gpu.device.createBindGroup({
    label: kernel.label,
    layout: kernel.layout,
    entries,
  });
  return { kernel, bindGroup, grid: opts.grid };
}

function packParams(kernel: Kernel, view: DataView, values: Record<string, number>): void {
  for (const [name, m] of kernel.params!.members) {
    const v = values[name];
    if (v === undefined || Number.isNaN(v)) throw new ShapeError(`${kernel.label}: param "${name}" missing`);
    if (m.type === "f32") view.setFloat32(m.offset, v, true);
    else if (m.type === "i32") view.setInt32(m.offset, v, true);
    else if (m.type === "u32") {
      if (v < 0 || !Number.isInteger(v)) {
        throw new ShapeError(`${kernel.label}: param "${name}" = ${v} is not a u32`);
      }
      view.setUint32(m.offset, v, true);
    } else throw new ShapeError(`${kernel.label}: param "${name}" has unsupported type ${m.type}`);
  }
  for (const k of Object.keys(values)) {
    if (!kernel.params!.members.has(k)) throw new ShapeError(`${kernel.label}: unknown param "${k}"`);
  }
}

/** Records dispatches into an open compute pass; skips redundant pipeline switches. */
export function encodeDispatches(
  pass: GPUComputePassEncoder,
  list: readonly Dispatch[],
  step: StepShape,
): void {
  let last: GPUComputePipeline | null = null;
  for (const d of list) {
    const [x, y, z] = typeof d.grid === "function" ? d.grid(step) : d.grid;
    if (x === 0 || y === 0 || z === 0) continue;
    if (d.kernel.pipeline !== last) {
      pass.setPipeline(d.kernel.pipeline);
      last = d.kernel.pipeline;
    }
    pass.setBindGroup(0, d.bindGroup);
    pass.dispatchWorkgroups(x, y, z);
  }
}

/** Folds a 1-D workgroup count into (x, y) with x ≤ 65535; kernels rebuild the index as x + y·nx. */
export function grid1d(n: number): Grid {
  if (n <= 65535) return [n, 1, 1];
  const y = Math.ceil(n / 65535);
  return [Math.ceil(n / y), y, 1];
}

/**
 * wgsl_reflect on a kernel's source; where it cannot parse it (Dawn's subgroup-matrix types), on the source
 * without those lines and without function bodies: bindings and the params struct are all it needs.
 */
export function reflect(code: string): WgslReflect {
  try {
    return new WgslReflect(code);
  } catch {
    const lines = code.split("\n").filter((l) => !l.includes("subgroup_matrix"));
    return new WgslReflect(withoutFunctions(lines.join("\n")));
  }
}

function withoutFunctions(code: string): string {
  let out = "";
  let i = 0;
  for (const m of code.matchAll(/^(@compute[^\n]*\n)?fn\s+\w+/gm)) {
    if (m.index! < i) continue;
    out += code.slice(i, m.index);
    let j = code.indexOf("{", m.index);
    let depth = 0;
    for (; j < code.length; j++) {
      if (code[j] === "{") depth++;
      else if (code[j] === "}" && --depth === 0) break;
    }
    i = j + 1;
  }
  return out + code.slice(i);
}

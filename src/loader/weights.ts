/**
 * Streams checkpoint tensors to GPU buffers. Linear weights stay in their checkpoint encoding (MLX affine
 * words, bf16 or f16; f32 becomes f16) and are decoded inside the matmul kernels; layers that share an input
 * (q/k/v, gate/up) are concatenated along N into one buffer when their formats match, so one dispatch serves
 * them. Matrices over the binding limit are split by rows. Bytes pass through one reusable staging array.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import type { ExpertLinear, ExpertShard, Linear, WeightFormat, WeightShard } from "../ops/linear.ts";
import type { ModelSource } from "../platform/mod.ts";
import type { QuantConfig, QuantSpec } from "./config.ts";
import { f32ToF16, readTensorBytes, type TensorEntry, type TensorIndex, toFloat32 } from "./safetensors.ts";

/** Several linears writing side by side into one output (fused when possible). */
export interface LinearGroup {
  N: number;
  K: number;
  parts: { w: Linear; nOff: number }[];
}

const STAGING = 32 * 1024 * 1024;

/**
 * A module path (without ".weight"), or some of its rows: `rows` lists [first, count] ranges of the tensor's
 * rows (leading dims flattened), taken in order. Checkpoints that interleave what the engine keeps apart
 * (Qwen3-Next's per-head [q | gate] rows, its per-key-head-group q/k/v/z rows) load through these.
 */
export type WeightRef = string | { path: string; rows: [number, number][] };

/** Where an MoE layer's experts live: HF per-expert modules, MLX `switch_mlp` stacks or HF fused stacks. */
export interface ExpertNames {
  /** The MoE block's module path (`model.layers.3.mlp`). */
  prefix: string;
  /** Projections stacked per expert, in order (`["gate_proj", "up_proj"]`). */
  names: string[];
  /** The HF fused stack holding them (`experts.gate_up_proj` [E, ΣN, K]), when a checkpoint has one. */
  fused: string;
}

/**
 * What architecture files load weights through. `WeightLoader` streams them from a checkpoint; the
 * benchmark's synthetic weights implement the same methods with random data made on the GPU.
 */
export interface WeightSource {
  has(name: string): boolean;
  /** A tensor's shape, or null when absent (or, for synthetic weights, not known). */
  shape(name: string): number[] | null;
  linear(path: string, N: number, K: number): Promise<Linear>;
  group(paths: WeightRef[], Ns: number[], K: number): Promise<LinearGroup>;
  /** Every expert's `names` projections stacked expert by expert (gate rows, then up rows, per expert). */
  experts(at: ExpertNames, E: number, Ns: number[], K: number): Promise<ExpertLinear>;
  vector(name: string, n: number, opts?: { plusOne?: boolean }): Promise<GPUBuffer>;
  /** A small float tensor of exactly `shape` as f32 (conv kernels, per-head constants). */
  array(name: string, shape: number[]): Promise<GPUBuffer>;
  uploadF32(label: string, v: Float32Array): GPUBuffer;
}

export class WeightLoader implements WeightSource {
  #staging = new Uint8Array(STAGING);
  #sinceFlush = 0;
  /** Bytes read from disk so far (progress reporting). */
  bytesRead = 0;

  constructor(
    readonly gpu: Gpu,
    readonly source: ModelSource,
    readonly index: TensorIndex,
    readonly quant: QuantConfig | null,
    readonly onProgress?: (bytes: number) => void,
  ) {}

  has(name: string): boolean {
    return this.index.tensors.has(name);
  }

  shape(name: string): number[] | null {
    return this.index.tensors.get(name)?.shape ?? null;
  }

  tensor(name: string): TensorEntry {
    const t = this.index.tensors.get(name);
    if (!t) throw new LoaderError(this.source.name, name, "tensor not found in the checkpoint");
    return t;
  }

  /** Quantization of module `path` (override, else quantized iff `path.scales` exists). */
  quantOf(path: string): QuantSpec | null {
    const o = this.quant?.overrides.get(path);
    if (o === false) return null;
    if (o) return o;
    if (!this.has(`${path}.scales`)) return null;
    if (!this.quant) {
      throw new LoaderError(
        this.source.name,
        `${path}.scales`,
        "quantized tensor but config.json has no quantization block",
      );
    }
    return this.quant.default;
  }

  /** One linear layer (module path without ".weight"), shape-checked against [N, K]. */
  async linear(path: string, N: number, K: number): Promise<Linear> {
    return (await this.group([path], [N], K)).parts[0].w;
  }

  /** Linears with the same input, concatenated along N when their formats allow it. */
  async group(paths: WeightRef[], Ns: number[], K: number): Promise<LinearGroup> {
    const specs = paths.map((p, i) =>
      typeof p === "string" ? this.#describe(p, Ns[i], K) : this.#describe(p.path, Ns[i], K, p.rows)
    );
    const parts: LinearGroup["parts"] = [];
    let nOff = 0;
    let i = 0;
    while (i < specs.length) {
      let j = i + 1;
      while (
        j < specs.length && sameFormat(specs[i].format, specs[j].format) &&
        !!specs[i].bias === !!specs[j].bias
      ) j++;
      const run = specs.slice(i, j);
      const w = await this.#upload(run, K);
      parts.push({ w, nOff });
      nOff += w.N;
      i = j;
    }
    return { N: nOff, K, parts };
  }

  /** A vector (norm weight, bias) as f32; `plusOne` stores 1 + w for (1 + w)-style norms. */
  async vector(name: string, n: number, opts: { plusOne?: boolean } = {}): Promise<GPUBuffer> {
    const t = this.tensor(name);
    if (t.shape.length !== 1 || t.shape[0] !== n) {
      throw new LoaderError(`${this.source.name}/${t.file}`, name, `expected shape [${n}], got [${t.shape}]`);
    }
    if (!["BF16", "F16", "F32"].includes(t.dtype)) {
      throw new LoaderError(`${this.source.name}/${t.file}`, name, `expected a float tensor, got ${t.dtype}`);
    }
    const v = toFloat32(await readTensorBytes(this.source, t), t.dtype);
    if (opts.plusOne) { for (let i = 0; i < v.length; i++) v[i] += 1; }
    this.bytesRead += t.byteLength;
    return this.uploadF32(name, v);
  }

  async array(name: string, shape: number[]): Promise<GPUBuffer> {
    const t = this.tensor(name);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new LoaderError(
        `${this.source.name}/${t.file}`,
        name,
        `expected shape [${shape}], got [${t.shape}]`,
      );
    }
    if (!["BF16", "F16", "F32"].includes(t.dtype)) {
      throw new LoaderError(`${this.source.name}/${t.file}`, name, `expected a float tensor, got ${t.dtype}`);
    }
    this.bytesRead += t.byteLength;
    return this.uploadF32(name, toFloat32(await readTensorBytes(this.source, t), t.dtype));
  }

  async experts(at: ExpertNames, E: number, Ns: number[], K: number): Promise<ExpertLinear> {
    const run: Described[] = [];
    const stacked = at.names.every((n) => this.has(`${at.prefix}.switch_mlp.${n}.weight`));
    const fused = this.has(`${at.prefix}.${at.fused}`);
    const sum = Ns.reduce((a, b) => a + b, 0);
    for (let e = 0; e < E; e++) {
      if (fused) {
        // HF fused stacks hold [E, ΣN, K] under the bare name (no ".weight").
        run.push(this.#describe(`${at.prefix}.${at.fused}`, sum, K, [[e * sum, sum]], ""));
        continue;
      }
      for (const [i, n] of at.names.entries()) {
        run.push(
          stacked
            ? this.#describe(`${at.prefix}.switch_mlp.${n}`, Ns[i], K, [[e * Ns[i], Ns[i]]])
            : this.#describe(`${at.prefix}.experts.${e}.${n}`, Ns[i], K),
        );
      }
    }
    const format = run[0].format;
    if (run.some((r) => !sameFormat(r.format, format) || r.bias)) {
      throw new LoaderError(
        this.source.name,
        `${at.prefix}.experts`,
        "experts differ in format or have biases",
      );
    }
    const rowBytes = format.kind === "q" ? (K * format.bits) / 8 : K * 2;
    // Shards hold whole experts, so a kernel finds an expert's rows in one buffer.
    const perShard = Math.max(1, Math.floor(this.gpu.info.maxBinding / (rowBytes * sum)));
    const name = `${at.prefix}.experts`;
    const shards: ExpertShard[] = [];
    for (let e0 = 0; e0 < E; e0 += perShard) {
      const count = Math.min(perShard, E - e0);
      const [n0, n] = [e0 * sum, count * sum];
      const shard: ExpertShard = { e0, count, w: await this.#rows(name, run, "wt", n0, n, rowBytes) };
      if (format.kind === "q") {
        const sb = (K / format.groupSize) * 2;
        shard.scales = await this.#rows(`${name}.scales`, run, "sc", n0, n, sb);
        shard.biases = await this.#rows(`${name}.biases`, run, "bi", n0, n, sb);
      }
      shards.push(shard);
    }
    return { name, E, N: sum, K, format, shards };
  }

  /** Uploads a small f32 array as a storage buffer (category weights). */
  uploadF32(label: string, v: Float32Array): GPUBuffer {
    const buf = this.gpu.memory.create("weights", {
      label,
      size: Math.max(16, Math.ceil(v.byteLength / 16) * 16),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    this.gpu.device.queue.writeBuffer(buf, 0, v);
    return buf;
  }

  /**
   * Module `path` as [N, K] rows for upload; `rows` picks [first, count] ranges of the tensor's rows (leading
   * dims flattened); `suffix` is the weight tensor's (HF fused expert stacks have none).
   */
  #describe(path: string, N: number, K: number, rows?: [number, number][], suffix = ".weight"): Described {
    const q = this.quantOf(path);
    const wt = this.tensor(`${path}${suffix}`);
    const where = `${this.source.name}/${wt.file}`;
    const bias = this.has(`${path}.bias`) ? this.tensor(`${path}.bias`) : null;
    const lead = (t: TensorEntry) => t.shape.slice(0, -1).reduce((a, b) => a * b, 1);
    const want = rows ? lead(wt) : N;
    if (rows) {
      const picked = rows.reduce((a, [, n]) => a + n, 0);
      if (picked !== N || bias || rows.some(([first, n]) => first < 0 || first + n > want)) {
        throw new LoaderError(where, `${path}${suffix}`, `rows ${JSON.stringify(rows)} of [${wt.shape}]`);
      }
    }
    if (q) {
      const cols = (K * q.bits) / 32;
      if (wt.dtype !== "U32" || lead(wt) !== want || wt.shape[wt.shape.length - 1] !== cols) {
        throw new LoaderError(
          where,
          `${path}${suffix}`,
          `expected U32 [${want}, ${cols}] (${q.bits}-bit, K=${K}), got ${wt.dtype} [${wt.shape}]`,
        );
      }
      const sc = this.tensor(`${path}.scales`);
      const bi = this.tensor(`${path}.biases`);
      for (const t of [sc, bi]) {
        if (lead(t) !== want || t.shape[t.shape.length - 1] !== K / q.groupSize) {
          throw new LoaderError(
            `${this.source.name}/${t.file}`,
            t.name,
            `expected [${N}, ${K / q.groupSize}] (group size ${q.groupSize}), got [${t.shape}]`,
          );
        }
        if (!["BF16", "F16", "F32"].includes(t.dtype)) {
          throw new LoaderError(`${this.source.name}/${t.file}`, t.name, `unsupported dtype ${t.dtype}`);
        }
      }
      const format: WeightFormat = {
        kind: "q",
        bits: q.bits,
        groupSize: q.groupSize,
        scaleF16: sc.dtype !== "BF16",
      };
      return { path, N, format, wt, sc, bi, bias, rows };
    }
    if (lead(wt) !== want || wt.shape[wt.shape.length - 1] !== K) {
      throw new LoaderError(where, `${path}${suffix}`, `expected [${want}, ${K}], got [${wt.shape}]`);
    }
    if (!["BF16", "F16", "F32"].includes(wt.dtype)) {
      throw new LoaderError(where, `${path}${suffix}`, `unsupported dtype ${wt.dtype}`);
    }
    const format: WeightFormat = wt.dtype === "BF16" ? { kind: "bf16" } : { kind: "f16" };
    return { path, N, format, wt, sc: null, bi: null, bias, rows };
  }

  async #upload(run: Described[], K: number): Promise<Linear> {
    const format = run[0].format;
    const N = run.reduce((a, r) => a + r.N, 0);
    const rowBytes = format.kind === "q" ? (K * format.bits) / 8 : K * 2;
    const maxRows = Math.max(64, Math.floor(this.gpu.info.maxBinding / rowBytes / 64) * 64);
    const name = run.map((r) => r.path).join("+");
    const shards: WeightShard[] = [];
    for (let n0 = 0; n0 < N; n0 += maxRows) {
      const n = Math.min(maxRows, N - n0);
      const shard: WeightShard = { n0, n, w: await this.#rows(name, run, "wt", n0, n, rowBytes) };
      if (format.kind === "q") {
        const sb = (K / format.groupSize) * 2;
        shard.scales = await this.#rows(`${name}.scales`, run, "sc", n0, n, sb);
        shard.biases = await this.#rows(`${name}.biases`, run, "bi", n0, n, sb);
      }
      shards.push(shard);
    }
    const lin: Linear = { name, N, K, format, shards };
    if (run.some((r) => r.bias)) {
      const b = new Float32Array(N);
      let off = 0;
      for (const r of run) {
        if (r.bias) b.set(toFloat32(await readTensorBytes(this.source, r.bias), r.bias.dtype), off);
        off += r.N;
      }
      lin.bias = this.uploadF32(`${name}.bias`, b);
    }
    return lin;
  }

  /** Rows [n0, n0+n) of the concatenation of `run`'s tensors `key`, as a GPU buffer of 16-bit/packed data. */
  async #rows(
    label: string,
    run: Described[],
    key: "wt" | "sc" | "bi",
    n0: number,
    n: number,
    outRowBytes: number,
  ): Promise<GPUBuffer> {
    const size = n * outRowBytes;
    const buf = this.gpu.memory.create("weights", {
      label,
      size: Math.max(16, Math.ceil(size / 4) * 4),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    let dst = 0;
    let rowBase = 0;
    for (const r of run) {
      const t = r[key]!;
      const inRowBytes = t.byteLength / t.shape.slice(0, -1).reduce((a, b) => a * b, 1);
      // The run's rows rowBase .. rowBase+N−1 come from these tensor row ranges, in order.
      for (const [first, count] of r.rows ?? [[0, r.N]]) {
        const lo = Math.max(n0, rowBase);
        const hi = Math.min(n0 + n, rowBase + count);
        if (lo < hi) {
          await this.#copy(buf, dst, t, (first + lo - rowBase) * inRowBytes, (hi - lo) * inRowBytes);
          dst += (hi - lo) * outRowBytes;
        }
        rowBase += count;
      }
    }
    return buf;
  }

  /** Copies `len` bytes of tensor `t` from `from` into `buf` at `dst`, converting F32 to 16 bits. */
  async #copy(buf: GPUBuffer, dst: number, t: TensorEntry, from: number, len: number): Promise<void> {
    const conv = t.dtype === "F32";
    const step = conv ? STAGING / 2 : STAGING;
    for (let done = 0; done < len; done += step) {
      const n = Math.min(step, len - done);
      const bytes = await this.source.read(t.file, t.offset + from + done, n, this.#staging);
      this.bytesRead += n;
      let out = bytes;
      if (conv) out = f32To16(bytes);
      // writeBuffer needs a 4-byte multiple; tensors are, except odd-length 16-bit slices (tiny ones).
      const padded = out.byteLength % 4 ? padTo4(out) : out;
      this.gpu.device.queue.writeBuffer(buf, dst + (conv ? done / 2 : done), padded);
      this.#sinceFlush += n;
      if (this.#sinceFlush > 256 * 1024 * 1024) {
        // Staged writes are only released after a submit completes: keep host memory bounded.
        this.#sinceFlush = 0;
        this.gpu.device.queue.submit([]);
        await this.gpu.device.queue.onSubmittedWorkDone();
      }
    }
    this.onProgress?.(this.bytesRead);
  }
}

interface Described {
  path: string;
  N: number;
  format: WeightFormat;
  wt: TensorEntry;
  sc: TensorEntry | null;
  bi: TensorEntry | null;
  bias: TensorEntry | null;
  /** Row ranges taken from the tensors (absent: rows 0 .. N−1). */
  rows?: [number, number][];
}

function sameFormat(a: WeightFormat, b: WeightFormat): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function padTo4(b: Uint8Array): Uint8Array {
  const p = new Uint8Array(Math.ceil(b.byteLength / 4) * 4);
  p.set(b);
  return p;
}

/** F32 bytes → f16 bytes (weights and scales of real checkpoints are far inside the f16 range). */
function f32To16(bytes: Uint8Array): Uint8Array {
  const f = new Float32Array(bytes.slice().buffer);
  const out = new Uint16Array(f.length);
  for (let i = 0; i < f.length; i++) out[i] = f32ToF16(f[i]);
  return new Uint8Array(out.buffer);
}

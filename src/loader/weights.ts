/**
 * Streams checkpoint tensors to GPU buffers. Linear weights stay in their checkpoint encoding (MLX affine
 * words, bf16 or f16; f32 becomes f16) and are decoded inside the matmul kernels; layers that share an input
 * (q/k/v, gate/up) are concatenated along N into one buffer when their formats match, so one dispatch serves
 * them. Matrices over the binding limit are split by rows. Bytes pass through one reusable staging array.
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import type { Linear, WeightFormat, WeightShard } from "../ops/linear.ts";
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
 * What architecture files load weights through. `WeightLoader` streams them from a checkpoint; the
 * benchmark's synthetic weights implement the same methods with random data made on the GPU.
 */
export interface WeightSource {
  has(name: string): boolean;
  linear(path: string, N: number, K: number): Promise<Linear>;
  group(paths: string[], Ns: number[], K: number): Promise<LinearGroup>;
  vector(name: string, n: number, opts?: { plusOne?: boolean }): Promise<GPUBuffer>;
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
  async group(paths: string[], Ns: number[], K: number): Promise<LinearGroup> {
    const specs = paths.map((p, i) => this.#describe(p, Ns[i], K));
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

  #describe(path: string, N: number, K: number): Described {
    const q = this.quantOf(path);
    const wt = this.tensor(`${path}.weight`);
    const where = `${this.source.name}/${wt.file}`;
    const bias = this.has(`${path}.bias`) ? this.tensor(`${path}.bias`) : null;
    if (q) {
      const cols = (K * q.bits) / 32;
      if (wt.dtype !== "U32" || wt.shape.length !== 2 || wt.shape[0] !== N || wt.shape[1] !== cols) {
        throw new LoaderError(
          where,
          `${path}.weight`,
          `expected U32 [${N}, ${cols}] (${q.bits}-bit, K=${K}), got ${wt.dtype} [${wt.shape}]`,
        );
      }
      const sc = this.tensor(`${path}.scales`);
      const bi = this.tensor(`${path}.biases`);
      for (const t of [sc, bi]) {
        if (t.shape.length !== 2 || t.shape[0] !== N || t.shape[1] !== K / q.groupSize) {
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
      return { path, N, format, wt, sc, bi, bias };
    }
    if (wt.shape.length !== 2 || wt.shape[0] !== N || wt.shape[1] !== K) {
      throw new LoaderError(where, `${path}.weight`, `expected [${N}, ${K}], got [${wt.shape}]`);
    }
    if (!["BF16", "F16", "F32"].includes(wt.dtype)) {
      throw new LoaderError(where, `${path}.weight`, `unsupported dtype ${wt.dtype}`);
    }
    const format: WeightFormat = wt.dtype === "BF16" ? { kind: "bf16" } : { kind: "f16" };
    return { path, N, format, wt, sc: null, bi: null, bias };
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
      const lo = Math.max(n0, rowBase);
      const hi = Math.min(n0 + n, rowBase + r.N);
      if (lo < hi) {
        const inRowBytes = t.byteLength / r.N;
        await this.#copy(buf, dst, t, (lo - rowBase) * inRowBytes, (hi - lo) * inRowBytes);
        dst += (hi - lo) * outRowBytes;
      }
      rowBase += r.N;
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

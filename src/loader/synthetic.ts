/**
 * Synthetic models for the benchmark: real shapes with random MLX affine weights made on the GPU, so a
 * multi-GB model is measured without a download. `SyntheticModelSource` is a virtual model folder (a
 * config.json generated in memory plus the tokenizer of a real folder); `SyntheticWeights` answers the
 * architecture's weight requests like `WeightLoader` does (q/k/v and gate/up fused along N, rows sharded
 * under the binding limit) with buffers filled by `fill_random.wgsl`.
 *
 * Weights: every packed word is random (all codes equally likely); per group scale s ~ U(0.5, 1.5)·c with
 * c = 0.02/8 · 15/(2^bits − 1), bias b = −(mid + u − 0.5)·s, so w = s·q + b spans about ±0.019 around 0
 * (std ≈ 0.011, the order of a real checkpoint's) and no group is ever all zero. Norm weights ~ U(0.9, 1.1).
 * @example
 * const src = new SyntheticModelSource("qwen3-4b", new DiskModelSource(DEFAULT_MODEL_DIR));
 * const engine = await Engine.load(src, { weightSource: src.weightSource({ seed: 1 }) });
 * @module
 */
import { LoaderError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import { encodeDispatches, ParamArena } from "../gpu/kernel.ts";
import type { ArchConfig } from "../models/model.ts";
import type { OpContext } from "../ops/context.ts";
import { fillRandom } from "../ops/fill.ts";
import type { ExpertLinear, Linear, WeightFormat, WeightShard } from "../ops/linear.ts";
import type { ModelSource } from "../platform/mod.ts";
import type { ExpertNames, LinearGroup, WeightRef, WeightSource } from "./weights.ts";
import { syntheticConfig, syntheticShape } from "./synthetic_shapes.ts";

export { SYNTHETIC_SHAPES, syntheticConfig, syntheticShape } from "./synthetic_shapes.ts";
export type { SyntheticShape } from "./synthetic_shapes.ts";

const TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json"];

/** A virtual model folder: config.json in memory, tokenizer files from `base` (a real model folder). */
export class SyntheticModelSource implements ModelSource {
  readonly name: string;
  readonly #config: string;

  constructor(
    readonly shape: string,
    readonly base: ModelSource,
    quant?: { bits: number; groupSize: number },
  ) {
    this.name = `synthetic/${shape}`;
    this.#config = JSON.stringify(syntheticConfig(shape, quant), null, 2);
  }

  async list(): Promise<string[]> {
    const have = await this.base.list();
    return ["config.json", ...TOKENIZER_FILES.filter((f) => have.includes(f))];
  }

  async size(file: string): Promise<number | null> {
    if (file === "config.json") return new TextEncoder().encode(this.#config).byteLength;
    return TOKENIZER_FILES.includes(file) ? await this.base.size(file) : null;
  }

  async read(file: string, offset: number, length: number, into?: Uint8Array): Promise<Uint8Array> {
    if (file === "config.json") {
      const b = new TextEncoder().encode(this.#config).subarray(offset, offset + length);
      if (into) {
        into.set(b);
        return into.subarray(0, b.length);
      }
      return b;
    }
    if (!TOKENIZER_FILES.includes(file)) {
      throw new LoaderError(`${this.name}/${file}`, null, "file not found (synthetic model)");
    }
    return await this.base.read(file, offset, length, into);
  }

  /** `EngineOptions.weightSource` for this shape (tied or not as the shape says). */
  weightSource(
    opts: Omit<SyntheticOptions, "tied"> = {},
  ): (gpu: Gpu, config: ArchConfig) => SyntheticWeights {
    return syntheticWeightSource({ ...opts, tied: syntheticShape(this.shape).tied });
  }

  async readText(file: string): Promise<string> {
    if (file === "config.json") return this.#config;
    if (!TOKENIZER_FILES.includes(file)) {
      throw new LoaderError(`${this.name}/${file}`, null, "file not found (synthetic model)");
    }
    return await this.base.readText(file);
  }
}

export interface SyntheticOptions {
  /** Seed of every stream (default 1). */
  seed?: number;
  /** Rows per shard at most (default: what fits the binding limit); tests force small shards. */
  maxShardRows?: number;
  /** The head is the embedding (default true): `has("lm_head.weight")` is false then. */
  tied?: boolean;
}

/** 32-bit FNV-1a of a tensor name mixed with the seed: each tensor gets its own stream. */
function streamOf(name: string, seed: number): number {
  let h = 0x811c9dc5 ^ Math.imul(seed, 0x9e3779b1);
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Scale range for `bits`: the weights span the same range whatever the bit width. */
export function scaleRange(bits: number): { lo: number; hi: number } {
  const c = (0.02 / 8) * (15 / (2 ** bits - 1));
  return { lo: 0.5 * c, hi: 1.5 * c };
}

/** Names a qwen3 MLX checkpoint holds (the tied head has none of its own). */
const LINEAR_RE =
  /^model\.layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)\.(weight|scales|biases)$/;
const VECTOR_RE =
  /^model\.layers\.(\d+)\.(input_layernorm|post_attention_layernorm|self_attn\.[qk]_norm)\.weight$/;

export class SyntheticWeights implements WeightSource {
  readonly format: WeightFormat;
  readonly seed: number;
  readonly #arena: ParamArena;

  constructor(readonly gpu: Gpu, readonly config: ArchConfig, readonly opts: SyntheticOptions = {}) {
    const q = config.quant?.default ?? { bits: 4, groupSize: 64 };
    this.format = { kind: "q", bits: q.bits, groupSize: q.groupSize, scaleF16: false };
    this.seed = opts.seed ?? 1;
    this.#arena = new ParamArena(gpu);
  }

  has(name: string): boolean {
    const layers = this.config.dims.layers;
    if (/^lm_head\.(weight|scales|biases)$/.test(name)) return this.opts.tied === false;
    if (/^model\.embed_tokens\.(weight|scales|biases)$/.test(name) || name === "model.norm.weight") {
      return true;
    }
    const m = LINEAR_RE.exec(name) ?? VECTOR_RE.exec(name);
    return !!m && Number(m[1]) < layers;
  }

  async linear(path: string, N: number, K: number): Promise<Linear> {
    return (await this.group([path], [N], K)).parts[0].w;
  }

  shape(_name: string): number[] | null {
    return null;
  }

  /** One Linear for all `paths`, concatenated along N (they share a format, so always fused). */
  async group(paths: WeightRef[], Ns: number[], K: number): Promise<LinearGroup> {
    const N = Ns.reduce((a, b) => a + b, 0);
    const name = paths.map((p) => typeof p === "string" ? p : p.path).join("+");
    const shards = await this.#shards(name, N, K, 64);
    return { N, K, parts: [{ w: { name, N, K, format: this.format, shards }, nOff: 0 }] };
  }

  /** Experts stacked like WeightLoader's, each shard whole experts. */
  async experts(at: ExpertNames, E: number, Ns: number[], K: number): Promise<ExpertLinear> {
    const per = Ns.reduce((a, b) => a + b, 0);
    const name = `${at.prefix}.${at.names.join("+")}`;
    const shards = await this.#shards(name, E * per, K, per);
    return {
      name,
      E,
      N: per,
      K,
      format: this.format,
      shards: shards.map((s) => ({
        e0: s.n0 / per,
        count: s.n / per,
        w: s.w,
        scales: s.scales,
        biases: s.biases,
      })),
    };
  }

  /** Small f32 tensors (conv kernels, per-head constants) ~ U(0.9, 1.1), like the norms. */
  array(name: string, shape: number[]): Promise<GPUBuffer> {
    return this.vector(name, shape.reduce((a, b) => a * b, 1));
  }

  /** N random rows in shards of a multiple of `unit` rows (and of 64, so scales start on a word). */
  async #shards(name: string, N: number, K: number, unit: number): Promise<WeightShard[]> {
    const f = this.format as Extract<WeightFormat, { kind: "q" }>;
    if (K % f.groupSize !== 0 || (K * f.bits) % 32 !== 0) {
      throw new LoaderError(`synthetic`, name, `K=${K} is not a multiple of the group size ${f.groupSize}`);
    }
    const rowWords = (K * f.bits) / 32;
    const groups = K / f.groupSize;
    const step = unit % 64 === 0 ? unit : unit * 64;
    const fit = Math.max(step, Math.floor(this.gpu.info.maxBinding / (rowWords * 4) / step) * step);
    const maxRows = Math.min(fit, this.opts.maxShardRows ?? Infinity);
    const wSeed = streamOf(`${name}.weight`, this.seed);
    const sSeed = streamOf(`${name}.scales`, this.seed);
    const bSeed = streamOf(`${name}.biases`, this.seed);
    const range = scaleRange(f.bits);
    const ctx = this.#ctx();
    const shards: WeightShard[] = [];
    for (let n0 = 0; n0 < N; n0 += maxRows) {
      const n = Math.min(maxRows, N - n0);
      const w = this.#buffer(name, n * rowWords);
      await fillRandom(ctx, {
        out: w,
        words: n * rowWords,
        word0: n0 * rowWords,
        seed: wSeed,
        fill: { kind: "raw" },
      });
      // Scales and biases: 16-bit, two per word; a shard starts on an even element (n0 is a multiple of 64).
      const sw = Math.ceil((n * groups) / 2);
      const s0 = (n0 * groups) / 2;
      const scales = this.#buffer(`${name}.scales`, sw);
      const biases = this.#buffer(`${name}.biases`, sw);
      await fillRandom(ctx, {
        out: scales,
        words: sw,
        word0: s0,
        seed: sSeed,
        fill: { kind: "uniformBf16", ...range },
      });
      await fillRandom(ctx, {
        out: biases,
        words: sw,
        word0: s0,
        seed: bSeed,
        fill: { kind: "biasBf16", scaleSeed: sSeed, ...range, mid: (2 ** f.bits - 1) / 2 },
      });
      shards.push({ n0, n, w, scales, biases });
    }
    this.#submit(ctx);
    return shards;
  }

  /** Norm weights ~ U(0.9, 1.1) (already the effective weight, whether or not the norm is (1 + w)-style). */
  async vector(name: string, n: number): Promise<GPUBuffer> {
    const buf = this.#buffer(name, n);
    const ctx = this.#ctx();
    await fillRandom(ctx, {
      out: buf,
      words: n,
      seed: streamOf(name, this.seed),
      fill: { kind: "uniformF32", lo: 0.9, hi: 1.1 },
    });
    this.#submit(ctx);
    return buf;
  }

  uploadF32(label: string, v: Float32Array): GPUBuffer {
    const buf = this.gpu.memory.create("weights", {
      label,
      size: Math.max(16, Math.ceil(v.byteLength / 16) * 16),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST,
    });
    this.gpu.device.queue.writeBuffer(buf, 0, v);
    return buf;
  }

  /** Waits until every fill has run (load-time measurement). */
  async settle(): Promise<void> {
    await this.gpu.device.queue.onSubmittedWorkDone();
  }

  // COPY_SRC so tests can read weights back and check their statistics.
  #buffer(label: string, words: number): GPUBuffer {
    return this.gpu.memory.create("weights", {
      label,
      size: Math.max(16, Math.ceil(words / 4) * 16),
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
    });
  }

  #ctx(): OpContext {
    return { gpu: this.gpu, arena: this.#arena, list: [] };
  }

  // The arena's chunks are rewritten whole on each flush; writes are queue-ordered before the submit.
  #submit(ctx: OpContext): void {
    this.#arena.flush();
    const enc = this.gpu.device.createCommandEncoder({ label: "synthetic fill" });
    const pass = enc.beginComputePass({ label: "synthetic fill" });
    encodeDispatches(pass, ctx.list, { maxKvLen: 0 });
    pass.end();
    this.gpu.device.queue.submit([enc.finish()]);
  }
}

/** `EngineOptions.weightSource` for synthetic weights. */
export function syntheticWeightSource(
  opts: SyntheticOptions = {},
): (gpu: Gpu, config: ArchConfig) => SyntheticWeights {
  return (gpu, config) => new SyntheticWeights(gpu, config, opts);
}

/**
 * The engine: a loaded model on a device, with its KV pool, slot state, activations and plan cache.
 * The scheduler (engine/scheduler.ts) drives it step by step; CLI, server and browser share it. Its
 * load-time sizes (batch, chunks, context window, KV pages) are worked out in engine/sizing.ts.
 * @module
 */
import { CapacityError, LoaderError, TokenizerError, ValidationError } from "../errors.ts";
import { Gpu, type GpuOptions } from "../gpu/device.ts";
import { encodeDispatches } from "../gpu/kernel.ts";
import type { ProfileOverrides } from "../gpu/profile.ts";
import { readBuffer } from "../gpu/readback.ts";
import { ConfigReader, readEos, ropeTables } from "../loader/config.ts";
import { readTensorIndex } from "../loader/safetensors.ts";
import { Tokenizer } from "../loader/tokenizer.ts";
import { WeightLoader, type WeightSource } from "../loader/weights.ts";
import type { ArchConfig, Architecture } from "../models/model.ts";
import { architectureFor } from "../models/registry.ts";
import type { ModelSource } from "../platform/mod.ts";
import { tokenBytes } from "../grammar/token_bytes.ts";
import { DEFAULT_GRAMMAR_STATES, GrammarSlots } from "./grammar.ts";
import { type KvCacheType, KvPool } from "./kv_pool.ts";
import { kvLayerCount, kvLayerIndex, RecurrentState } from "./recurrent.ts";
import { type Activations, allocActivations, type Dims } from "./resources.ts";
import { engineSizes } from "./sizing.ts";
import { Slots } from "./slots.ts";
import { layoutKey, type Plan, StepGraph, type StepLayout } from "./step.ts";

/**
 * Share of a step's dispatches submitted ahead (`encodeStep` part "head"): a few layers, whose GPU time far
 * exceeds the CPU time to encode the rest.
 */
const HEAD_SHARE = 1 / 8;

export interface EngineOptions {
  gpu?: Gpu;
  /** Options of the device made when `gpu` is not given; `profile` also applies to a given `gpu`. */
  gpuOptions?: GpuOptions;
  /** Context window in tokens; default the model's maximum, capped by the KV budget. */
  contextWindow?: number;
  /** Sequences decoded together in one step (default 8). */
  maxBatch?: number;
  /**
   * Prefill rows per step while other sequences decode in the same steps (default 2048 with maxBatch 1, else
   * 512).
   */
  prefillChunk?: number;
  /**
   * Prefill rows per step while the prompt's sequence is the only one running (a long agent prompt on an
   * idle server): default `prefillChunk` where that is given, else 2048, or fewer where 2048 rows of an
   * activation would pass the storage-binding limit. Either size gives the same bits (batch invariance).
   */
  soloPrefillChunk?: number;
  /** Tokens per KV page (default 16). */
  pageSize?: number;
  /** Rows that can get logits in one "all"-logits step (tests, eval); default max(maxBatch, 16). */
  logitRows?: number;
  /** Bytes the KV pool may use (default 4 GiB). */
  kvBudget?: number;
  /** Sliding-window layers keep a ring of pages per slot (default true; false: pool pages, as full layers). */
  kvRing?: boolean;
  /**
   * KV cache element type (default "act": f16, or f32 without shader-f16). "q8": 8-bit codes with a scale
   * per 32 values, quantized as K/V are written: 1.125 bytes per value instead of 2, so twice the context
   * fits and long-context attention reads about half the bytes (quality: bench/NOTES.md).
   */
  kvCache?: KvCacheType;
  /**
   * Automaton states a constrained sequence's grammar may have (default 4096: 516 bytes each per slot);
   * 0 leaves out the grammar tables. Models without a tokenizer have none either way.
   */
  grammarStates?: number;
  /** Compile the step kernels at load (default true) so the first request does not pay for it. */
  warmup?: boolean;
  /**
   * Where weights come from instead of the folder's safetensors (the benchmark's synthetic weights).
   * The folder still provides config.json and the tokenizer.
   */
  weightSource?: (gpu: Gpu, config: ArchConfig) => WeightSource | Promise<WeightSource>;
  /** Loading progress: bytes of weights read so far, out of the total. */
  onProgress?: (done: number, total: number) => void;
}

export interface ModelInfo {
  name: string;
  modelType: string;
  dims: Dims;
  maxPosition: number;
  quantization: string;
  weightBytes: number;
}

export class Engine {
  readonly #plans = new Map<string, Promise<Plan>>();
  /** The device as plans record on it: `gpu`, or `gpu` under another kernel profile (setKernelProfile). */
  #planGpu: Gpu | null = null;
  static readonly MAX_PLANS = 64;

  private constructor(
    readonly gpu: Gpu,
    readonly info: ModelInfo,
    readonly arch: Architecture,
    readonly config: ArchConfig,
    readonly weights: unknown,
    /** null for bare checkpoints without tokenizer.json (test fixtures): logits only. */
    readonly tokenizer: Tokenizer | null,
    readonly eosIds: number[],
    readonly kv: KvPool,
    /** Per-slot state of recurrent layers (null for models whose layers all keep KV pages). */
    readonly recurrent: RecurrentState | null,
    readonly slots: Slots,
    readonly acts: Activations,
    readonly invFreq: GPUBuffer,
    readonly mscale: number,
    readonly contextWindow: number,
    readonly maxBatch: number,
    readonly prefillChunk: number,
    readonly soloPrefillChunk: number,
    /** Constrained decoding's GPU state; null without a tokenizer (see `grammarUnavailable`). */
    readonly grammar: GrammarSlots | null,
    /** Why `grammar` is null, for the error a constrained request gets. */
    readonly grammarUnavailable: string | null,
  ) {}

  static async load(source: ModelSource, opts: EngineOptions = {}): Promise<Engine> {
    const files = await source.list();
    if (!files.includes("config.json")) {
      throw new LoaderError(`${source.name}/config.json`, null, "file not found");
    }
    let json: any;
    try {
      json = JSON.parse(await source.readText("config.json"));
    } catch (e) {
      throw new LoaderError(`${source.name}/config.json`, null, `not valid JSON (${(e as Error).message})`);
    }
    const cfgFile = `${source.name}/config.json`;
    const reader = new ConfigReader(cfgFile, json);
    const arch = architectureFor(json.model_type, cfgFile);
    const config = arch.parseConfig(reader);
    if (kvLayerCount(config) === 0) {
      throw new LoaderError(cfgFile, "layer_types", "a model needs at least one attention layer");
    }
    let generation: any = null;
    if (files.includes("generation_config.json")) {
      try {
        generation = JSON.parse(await source.readText("generation_config.json"));
      } catch {
        throw new LoaderError(`${source.name}/generation_config.json`, null, "not valid JSON");
      }
    }
    const eosIds = readEos(json, generation);
    const tokenizer = files.includes("tokenizer.json") ? await Tokenizer.load(source) : null;
    const profile = opts.gpuOptions?.profile;
    const gpu = opts.gpu
      ? (profile ? opts.gpu.withProfile(profile) : opts.gpu)
      : await Gpu.create(opts.gpuOptions);
    // Checked before any weight is read (a device made here is released again).
    const kvType = opts.kvCache ?? "act";
    const kvProblem = kvType !== "act" && kvType !== "q8"
      ? `KV cache type "${kvType}": "act" or "q8"`
      : kvType === "q8" && !gpu.info.int8Dot
      ? `the 8-bit KV cache needs WGSL's packed_4x8_integer_dot_product, which ${gpu.info.adapter} lacks`
      : null;
    if (kvProblem) {
      if (!opts.gpu) gpu.destroy();
      throw new ValidationError(kvProblem, "kvCache");
    }
    let loader: WeightSource;
    if (opts.weightSource) loader = await opts.weightSource(gpu, config);
    else {
      const index = await readTensorIndex(source);
      const totalBytes = [...index.tensors.values()].reduce((a, t) => a + t.byteLength, 0);
      loader = new WeightLoader(gpu, source, index, config.quant, (b) => opts.onProgress?.(b, totalBytes));
    }
    const before = gpu.memory.bytes("weights");
    const weights = await arch.loadWeights(loader, config);
    const weightBytes = gpu.memory.bytes("weights") - before;

    const d = config.dims;
    const sizes = engineSizes(config, gpu, kvType, opts, weights);
    const { maxBatch, prefillChunk, soloPrefillChunk, contextWindow, cap } = sizes;
    const { pageSize, maxPages, numPages, ring } = sizes;
    const kv = new KvPool(gpu, {
      layers: kvLayerCount(config),
      nkv: d.nkv,
      hd: d.hd,
      pageSize,
      numPages,
      maxSlots: maxBatch,
      maxPages,
      type: kvType,
      ...(ring ? { ring } : {}),
    });
    const recurrent = new RecurrentState(gpu, config, maxBatch);
    const slots = new Slots(gpu, maxBatch, contextWindow + 1, eosIds);
    const acts = allocActivations(gpu, d, cap, config.hybrid, weights);
    const rt = ropeTables(config.rope);
    const invBuf = loader.uploadF32("inv_freq", rt.invFreq);
    const q = config.quant;
    const info: ModelInfo = {
      name: source.name.split("/").filter(Boolean).pop() ?? source.name,
      modelType: config.modelType,
      dims: d,
      maxPosition: config.maxPosition,
      quantization: q ? `affine ${q.default.bits}-bit g${q.default.groupSize}` : "none (16-bit)",
      weightBytes,
    };
    let grammar: GrammarSlots | null = null;
    let grammarUnavailable: string | null = null;
    const states = opts.grammarStates ?? DEFAULT_GRAMMAR_STATES;
    if (!tokenizer) grammarUnavailable = "the model has no tokenizer.json, so token bytes are unknown";
    else if (states < 1) grammarUnavailable = "the engine was loaded with grammarStates 0";
    else {
      try {
        grammar = new GrammarSlots(gpu, maxBatch, tokenBytes(tokenizer.json, d.vocab), states, eosIds);
      } catch (e) {
        if (!(e instanceof TokenizerError)) throw e;
        grammarUnavailable = e.message;
      }
    }
    const engine = new Engine(
      gpu,
      info,
      arch,
      config,
      weights,
      tokenizer,
      eosIds,
      kv,
      recurrent.any ? recurrent : null,
      slots,
      acts,
      invBuf,
      rt.mscale,
      contextWindow,
      maxBatch,
      prefillChunk,
      soloPrefillChunk,
      grammar,
      grammarUnavailable,
    );
    if (opts.warmup !== false) await engine.warmup();
    return engine;
  }

  /**
   * Builds and runs the plans of a one-token prefill and a decode step on a scratch slot, so every kernel
   * variant is compiled (drivers may defer it to first use) before the first request is timed.
   */
  async warmup(): Promise<void> {
    const pre = await this.plan({
      decode: 0,
      segments: [{ row0: 0, len: 1, final: true }],
      logits: "sampled",
    });
    const dec = await this.plan({ decode: 1, segments: [], logits: "sampled" });
    // Compiles the grammar kernels too (the plan is built, not run: its kernels are the decode plan's + two).
    if (this.grammar) await this.plan({ decode: 1, segments: [], logits: "sampled", grammar: true });
    const slot = this.slots.acquire();
    if (slot === null) return;
    const pages: number[] = [];
    try {
      this.kv.ensure(slot, pages, 2);
      this.slots.start(slot, [0], 2, { temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0 });
      this.writeRows(new Uint32Array([0, 0, slot, 0]));
      let enc = this.gpu.device.createCommandEncoder();
      this.encodeStep(enc, pre, 1);
      this.gpu.device.queue.submit([enc.finish()]);
      this.writeRows(new Uint32Array([0, 0, slot, 1]));
      enc = this.gpu.device.createCommandEncoder();
      this.encodeStep(enc, dec, 2);
      this.gpu.device.queue.submit([enc.finish()]);
      await readBuffer(this.gpu, this.slots.slots, slot * 16, 16);
    } finally {
      this.kv.release(pages);
      this.slots.release(slot);
    }
  }

  /** The plan for a step layout, built once (bind groups, params) and cached. */
  plan(layout: StepLayout): Promise<Plan> {
    const key = layoutKey(layout);
    let p = this.#plans.get(key);
    if (p) {
      this.#plans.delete(key); // LRU: re-insert as most recent
      this.#plans.set(key, p);
      return p;
    }
    p = (async () => {
      const g = new StepGraph({
        gpu: this.#planGpu ?? this.gpu,
        dims: this.config.dims,
        acts: this.acts,
        kv: this.kv,
        kvIndex: kvLayerIndex(this.config),
        recurrent: this.recurrent,
        hybrid: this.config.hybrid,
        slots: this.slots,
        invFreq: this.invFreq,
        mscale: this.mscale,
        grammar: this.grammar,
      }, layout);
      await this.arch.forward(g, this.weights, this.config);
      return g.finish();
    })();
    this.#plans.set(key, p);
    p.catch(() => this.#plans.delete(key));
    while (this.#plans.size > Engine.MAX_PLANS) {
      const [oldKey, old] = this.#plans.entries().next().value!;
      this.#plans.delete(oldKey);
      old.then((pl) => pl.destroy(this.gpu)).catch(() => {});
    }
    return p;
  }

  /**
   * Records later plans under the engine's kernel profile with `overrides` applied (benchmark A/B runs on one
   * loaded model; buffers sized at load stay, so a profile that needs more scratch is an error). Drops the
   * cached plans: only call it between requests.
   */
  async setKernelProfile(overrides: ProfileOverrides): Promise<void> {
    await this.dropPlans();
    this.#planGpu = this.gpu.withProfile(overrides);
  }

  /**
   * Drops every cached plan, so the next steps are recorded again. Only call it between requests: a plan in
   * use by a submitted step is destroyed here.
   */
  async dropPlans(): Promise<void> {
    const old = [...this.#plans.values()];
    this.#plans.clear();
    for (const p of old) (await p.catch(() => null))?.destroy(this.gpu);
  }

  /**
   * Records one step (one compute pass). `maxKvLen` sizes the decode-attention grid; `minKvLen` (the
   * shortest running decode row, 0 if unknown) lets it skip the variant for short rows when there are none.
   */
  encodeStep(
    encoder: GPUCommandEncoder,
    plan: Plan,
    maxKvLen: number,
    minKvLen = 0,
    part?: "head" | "tail",
  ): void {
    const pass = encoder.beginComputePass({ label: "step" });
    // `part`: the step's first dispatches (HEAD_SHARE of them) or the rest, for a step whose head goes to the
    // GPU before the rest is encoded (a prefill on an idle GPU: its encoding then overlaps the GPU's work).
    const cut = Math.ceil(plan.list.length * HEAD_SHARE);
    const list = part === "head"
      ? plan.list.slice(0, cut)
      : part === "tail"
      ? plan.list.slice(cut)
      : plan.list;
    encodeDispatches(pass, list, { maxKvLen, minKvLen });
    pass.end();
  }

  /** Uploads the step's row table: [token, pos, slot, kind] per row. */
  writeRows(rows: Uint32Array): void {
    this.gpu.device.queue.writeBuffer(this.acts.rows, 0, rows);
  }

  /**
   * Logits of every position of `ids` (one sequence, prefilled in chunks): Float32Array (n, vocab).
   * For tests and evaluation; generation goes through the scheduler.
   */
  async forwardLogits(ids: number[]): Promise<Float32Array> {
    const V = this.config.dims.vocab;
    const chunk = Math.min(this.soloPrefillChunk, this.acts.cap.logitRows);
    const slot = this.slots.acquire();
    if (slot === null) throw new CapacityError("no free sequence slot");
    const pages: number[] = [];
    const out = new Float32Array(ids.length * V);
    try {
      this.kv.ensure(slot, pages, ids.length - 1);
      for (let p0 = 0; p0 < ids.length; p0 += chunk) {
        const n = Math.min(chunk, ids.length - p0);
        const rows = new Uint32Array(4 * n);
        for (let i = 0; i < n; i++) rows.set([ids[p0 + i], p0 + i, slot, 0], 4 * i);
        this.writeRows(rows);
        const plan = await this.plan({
          decode: 0,
          segments: [{ row0: 0, len: n, final: false }],
          logits: "all",
        });
        const enc = this.gpu.device.createCommandEncoder();
        this.encodeStep(enc, plan, p0 + n);
        this.gpu.device.queue.submit([enc.finish()]);
        out.set(new Float32Array(await readBuffer(this.gpu, this.acts.logits, 0, n * V * 4)), p0 * V);
      }
    } finally {
      this.kv.release(pages);
      this.slots.release(slot);
    }
    return out;
  }

  destroy(): void {
    this.gpu.destroy();
  }
}

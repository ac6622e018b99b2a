/**
 * A model running in this tab: the same Engine and Scheduler as the server, fed by a browser ModelSource.
 * Adds what a browser user needs to hear: the load's stages (weights, then kernel compilation), prompt
 * progress within a chunk (estimated, prefill_estimate.ts), missing WebGPU or shader-f16, and a model that
 * does not fit.
 * @module
 */
import { Engine } from "../src/engine/engine.ts";
import type { KvCacheType } from "../src/engine/kv_pool.ts";
import { Scheduler, type SchedulerEvent } from "../src/engine/scheduler.ts";
import { DeviceError, TokenizerError } from "../src/errors.ts";
import { Gpu } from "../src/gpu/device.ts";
import { type BlobModelSource, formatBytes } from "../src/platform/browser.ts";
import type { ChatBackend, ChatTurn, ReplyHandlers, ReplyStats, Sampling } from "./backend.ts";
import { PrefillEstimator } from "./prefill_estimate.ts";

/** Where a load is: weight bytes read so far, then kernel compilation (no measure of its own). */
export type LoadProgress = { stage: "weights"; done: number; total: number } | { stage: "compile" };

export interface LoadOptions {
  contextWindow: number;
  /** KV cache element type (default act: f16). */
  kvCache?: KvCacheType;
  onProgress?: (p: LoadProgress) => void;
  /** f16 activations where the adapter has shader-f16 (default true). */
  f16?: boolean;
}

/** Opens the device once to describe it (status pill, notices) and closes it again. */
export async function describeGpu(): Promise<{ adapter: string; f16: boolean; subgroups: boolean }> {
  const gpu = await Gpu.create();
  const r = { adapter: gpu.info.adapter, f16: gpu.info.f16, subgroups: gpu.info.subgroups };
  gpu.destroy();
  return r;
}

export class LocalModel implements ChatBackend {
  readonly #sched: Scheduler;
  private constructor(readonly engine: Engine, readonly source: BlobModelSource) {
    this.#sched = new Scheduler(engine);
  }

  get label(): string {
    const g = this.engine.gpu.info;
    return `${this.engine.info.name} · ${g.adapter} · ${g.f16 ? "f16" : "f32"}${
      this.engine.kv.scales ? " · 8-bit KV" : ""
    }`;
  }

  /**
   * Loads `source` (LoaderError names the file and field, as in the CLI). Out-of-memory during the load is
   * caught with an error scope and reported as a model that does not fit, with its size.
   */
  static async load(source: BlobModelSource, opts: LoadOptions): Promise<LocalModel> {
    const gpu = await Gpu.create({ f16: opts.f16 });
    let lost: string | null = null;
    gpu.device.lost.then((l) => (lost = l.reason === "destroyed" ? null : l.message || "device lost"));
    gpu.device.pushErrorScope("out-of-memory");
    let engine: Engine | null = null;
    try {
      engine = await Engine.load(source, {
        gpu,
        contextWindow: opts.contextWindow,
        kvCache: opts.kvCache,
        maxBatch: 1,
        // The KV pool holds one sequence; a browser GPU shares memory with everything else on the machine.
        kvBudget: 1024 * 2 ** 20,
        // Run here instead, so the page can tell weight reading from kernel compilation.
        warmup: false,
        onProgress: (done, total) => opts.onProgress?.({ stage: "weights", done, total }),
      });
      opts.onProgress?.({ stage: "compile" });
      await engine.warmup();
    } catch (e) {
      await gpu.device.popErrorScope().catch(() => null);
      gpu.destroy(); // the engine's buffers go with its device
      if (lost) throw tooBig(source, `the GPU device was lost (${lost})`);
      throw e;
    }
    const oom = await gpu.device.popErrorScope();
    if (oom || lost) {
      engine.destroy();
      throw tooBig(source, oom ? oom.message : `the GPU device was lost (${lost})`);
    }
    return new LocalModel(engine, source);
  }

  async reply(turns: ChatTurn[], s: Sampling, on: ReplyHandlers, signal: AbortSignal): Promise<ReplyStats> {
    const tok = this.engine.tokenizer;
    if (!tok) throw new TokenizerError(`${this.engine.info.name} has no tokenizer.json: it cannot chat`);
    // Base models without a chat template continue the conversation as plain text.
    const text = tok.hasChatTemplate
      ? tok.applyChatTemplate(turns.map((t) => ({ ...t })))
      : turns.map((t) => t.content).join("\n\n");
    const prompt = tok.encode(text);
    const room = this.engine.contextWindow - prompt.length;
    const gen = this.#sched.submit({
      prompt,
      maxTokens: Math.max(1, Math.min(s.maxTokens, room)),
      sampling: { temperature: s.temperature, topP: s.topP, topK: s.topK, minP: s.minP, seed: s.seed },
      signal,
    });
    const estimate = new PrefillEstimator(prompt.length, this.engine.soloPrefillChunk, on.onPrefill).start();
    const listen = (e: SchedulerEvent) => {
      if (e.id !== gen.id) return;
      if (e.type === "prefill") estimate.real(e.processed);
      else if (e.type === "cached") estimate.real(e.tokens);
    };
    this.#sched.listeners.add(listen);
    try {
      for await (const c of gen.chunks()) {
        estimate.stop();
        if (c.text) on.onText(c.text);
      }
      const r = await gen.result;
      if (r.error) throw r.error;
      return {
        promptTokens: r.promptTokens,
        cachedTokens: r.cachedTokens,
        completionTokens: r.completionTokens,
        ttftMs: r.ttftMs || null,
        decodeTps: r.decodeTps || null,
        finishReason: r.finishReason,
        tokenIds: r.tokenIds,
      };
    } finally {
      estimate.stop();
      this.#sched.listeners.delete(listen);
    }
  }

  async unload(): Promise<void> {
    await this.#sched.close();
    this.engine.destroy();
  }
}

function tooBig(src: BlobModelSource, why: string): DeviceError {
  return new DeviceError(
    `${src.name} (${formatBytes(src.bytes)}) does not fit in this GPU's memory: ${why}. ` +
      "Try a smaller context window, a more quantized model, or closing other GPU-heavy tabs.",
  );
}

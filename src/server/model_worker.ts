/**
 * The model worker: owns the GPU device, the engine and its scheduler for one served model. Its loop may
 * block this thread for a whole prefill chunk (Deno's `mapAsync` waits for the GPU to go idle), which is
 * why it runs here and not on the HTTP thread. Requests arrive as messages; text chunks, results and
 * scheduler events go back as messages, with a snapshot of the pool and queue after every event.
 * @module
 */
/// <reference lib="deno.worker" />
import { Engine } from "../engine/engine.ts";
import { failedResult, type SchedulerOptions } from "../engine/generation.ts";
import { type GenerationResult, Scheduler } from "../engine/scheduler.ts";
import { SyntheticModelSource, syntheticWeightSource } from "../loader/synthetic.ts";
import { DiskModelSource } from "../platform/deno.ts";
import { prefixFolder } from "../platform/prefix_folder.ts";
import { ValidationError } from "../errors.ts";
import {
  type ModelInfo,
  type ModelLoadOptions,
  type ModelReply,
  type ModelRequest,
  type ModelStats,
  type PrefixCacheReport,
  toWireError,
  type WireResult,
} from "./worker_protocol.ts";

let engine: Engine | null = null;
let scheduler: Scheduler | null = null;
const aborts = new Map<number, AbortController>();
/** Scheduler id → the request id the HTTP thread chose (events carry the latter). */
const outerIds = new Map<number, number>();

function post(m: ModelReply): void {
  self.postMessage(m);
}

function stats(): ModelStats {
  const e = engine!;
  return {
    ...pageSplit(e),
    freePages: e.kv.freePages,
    queued: scheduler?.queued ?? 0,
    running: scheduler?.running ?? 0,
    memory: e.gpu.memory.snapshot(),
    prefixCache: prefixCacheReport(),
  };
}

/** Pages held by requests, and by the prefix cache alone (its idle pages). */
function pageSplit(e: Engine): { usedPages: number; cachedPages: number } {
  const cachedPages = scheduler?.prefixCache?.idlePages ?? 0;
  return { usedPages: e.kv.usedPages - cachedPages, cachedPages };
}

/** The cache's counters and sizes, with its second tier's (zero and null without one). */
function prefixCacheReport(): PrefixCacheReport | null {
  const cache = scheduler?.prefixCache;
  if (!cache) return null;
  const store = scheduler?.prefixStore;
  return {
    ...cache.snapshot(),
    diskBytes: store?.bytes ?? 0,
    diskBudgetBytes: store?.budgetBytes ?? 0,
    dir: store?.folder.where ?? null,
  };
}

/**
 * The second tier's folder for this model (a subfolder named by its fingerprint); none when none is asked
 * for or it cannot be made: the server then serves with the memory tier alone.
 */
async function diskTier(o: ModelLoadOptions, e: Engine): Promise<SchedulerOptions["prefixFolder"]> {
  if (!o.prefixCacheDir || o.prefixCacheBytes === 0 || o.prefixCacheDiskBytes === 0) return undefined;
  try {
    const f = await prefixFolder(o.prefixCacheDir, o.dir, e, o.synthetic && `synthetic ${o.synthetic}`);
    return { ...f, budgetBytes: o.prefixCacheDiskBytes ?? 16 * 2 ** 30 };
  } catch (err) {
    console.warn(`[flint] prefix cache: no disk tier in ${o.prefixCacheDir}: ${(err as Error).message}`);
    return undefined;
  }
}

function wireResult(r: GenerationResult): WireResult {
  const { error, ...rest } = r;
  return error ? { ...rest, error: toWireError(error) } : rest;
}

async function load(m: Extract<ModelRequest, { type: "load" }>): Promise<void> {
  const o = m.opts;
  const source = o.synthetic
    ? new SyntheticModelSource(o.synthetic, new DiskModelSource(o.dir))
    : new DiskModelSource(o.dir);
  engine = await Engine.load(source, {
    ...(o.synthetic ? { weightSource: syntheticWeightSource() } : {}),
    kvBudget: o.kvBudgetBytes,
    gpuOptions: { f16: o.f16, webgpu: o.webgpu },
    maxBatch: o.maxBatch,
    contextWindow: o.contextWindow,
    prefillChunk: o.prefillChunk,
    soloPrefillChunk: o.soloPrefillChunk,
    kvCache: o.kvCache,
  });
  if (source instanceof DiskModelSource) source.close();
  if (!engine.tokenizer) {
    engine.destroy();
    engine = null;
    throw new ValidationError(`${o.dir} has no tokenizer.json; the server needs one`, "model");
  }
  scheduler = new Scheduler(engine, {
    stepsPerSubmit: o.stepsPerSubmit,
    prefixCacheBytes: o.prefixCacheBytes,
    prefixFolder: await diskTier(o, engine),
  });
  scheduler.listeners.add((event) => {
    const id = outerIds.get(event.id);
    if (id === undefined) return;
    if (event.type === "finish") outerIds.delete(event.id);
    post({ type: "event", event: { ...event, id }, stats: stats() });
  });
  const e = engine;
  const info: ModelInfo = {
    name: e.info.name,
    modelType: e.info.modelType,
    quantization: e.info.quantization,
    weightBytes: e.info.weightBytes,
    maxPosition: e.info.maxPosition,
    contextWindow: e.contextWindow,
    capped: e.contextWindow < e.info.maxPosition,
    vocab: e.config.dims.vocab,
    adapter: e.gpu.info.adapter,
    webgpu: e.gpu.info.webgpu,
    f16: e.gpu.info.f16,
    kv8: !!e.kv.scales,
    kvPageBytes: e.kv.bytesPerPage,
    kvPages: e.kv.shape.numPages,
    maxBatch: e.maxBatch,
    prefillChunk: e.prefillChunk,
    soloPrefillChunk: e.soloPrefillChunk,
  };
  post({ type: "loaded", info, stats: stats() });
  // The second tier writes and deletes files while no request runs (no scheduler events to carry them).
  const store = scheduler.prefixStore;
  if (store) store.onFilesChanged = () => post({ type: "stats", stats: stats() });
}

function submit(m: Extract<ModelRequest, { type: "submit" }>): void {
  const abort = new AbortController();
  aborts.set(m.id, abort);
  const { req } = m;
  let gen;
  try {
    gen = scheduler!.submit({
      prompt: Array.from(req.prompt),
      maxTokens: req.maxTokens,
      sampling: req.sampling,
      stop: req.stop,
      signal: abort.signal,
      ...(req.grammar ? { grammar: req.grammar } : {}),
    });
  } catch (e) {
    aborts.delete(m.id);
    post({ type: "result", id: m.id, result: failed(req.prompt.length, e) });
    return;
  }
  outerIds.set(gen.id, m.id);
  // The start event was emitted inside submit, before the id mapping existed.
  post({
    type: "event",
    event: { type: "start", id: m.id, promptTokens: req.prompt.length },
    stats: stats(),
  });
  (async () => {
    for await (const c of gen.chunks()) post({ type: "chunk", id: m.id, ids: c.ids, text: c.text });
    const r = await gen.result;
    aborts.delete(m.id);
    post({ type: "result", id: m.id, result: wireResult(r) });
  })().catch((e) => post({ type: "result", id: m.id, result: failed(req.prompt.length, e) }));
}

function failed(promptTokens: number, e: unknown): WireResult {
  return wireResult(failedResult(promptTokens, e instanceof Error ? e : new Error(String(e))));
}

self.onmessage = async (ev: MessageEvent<ModelRequest>) => {
  const m = ev.data;
  switch (m.type) {
    case "load":
      try {
        await load(m);
      } catch (e) {
        post({ type: "load_error", error: toWireError(e) });
      }
      return;
    case "submit":
      return submit(m);
    case "cancel":
      aborts.get(m.id)?.abort();
      return;
    case "close":
      await scheduler?.close();
      engine?.destroy();
      post({ type: "closed" });
      self.close();
  }
};

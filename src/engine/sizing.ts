/**
 * The engine's load-time sizes: batch, page size, prefill chunks, the context window the KV budget and the
 * storage-binding limit allow, the KV pool's pages, sliding layers' KV rings, and the capacities the
 * activation buffers are made for.
 * @module
 */
import { CapacityError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import { type ArchConfig, keepsKv, layerSpec } from "../models/model.ts";
import type { EngineOptions } from "./engine.ts";
import { kvBytesPerToken, type KvCacheType, kvValueBytesPerToken } from "./kv_pool.ts";
import { ringPages } from "./kv_ring.ts";
import { kvLayerCount } from "./recurrent.ts";
import { type Capacity, soloRowsCap, soloRowsFit } from "./resources.ts";

export interface EngineSizes {
  maxBatch: number;
  /** Tokens per KV page. */
  pageSize: number;
  /** Prefill rows per step beside decoding sequences, and with the prompt's sequence alone. */
  prefillChunk: number;
  soloPrefillChunk: number;
  contextWindow: number;
  /** KV pages of one sequence at the full context window, and of the whole pool. */
  maxPages: number;
  numPages: number;
  /** Sliding-window layers' rings (indexes among the KV layers, pages per slot); null: none. */
  ring: { layers: number[]; pages: number } | null;
  /** What the activation buffers are allocated for (allocActivations). */
  cap: Capacity;
}

/**
 * Sizes from the options, the model and the device. Throws CapacityError when a requested context window
 * does not fit.
 */
export function engineSizes(
  config: ArchConfig,
  gpu: Gpu,
  kvType: KvCacheType,
  opts: EngineOptions,
  weights?: unknown,
): EngineSizes {
  const d = config.dims;
  const maxBatch = opts.maxBatch ?? 8;
  const pageSize = opts.pageSize ?? 16;
  // Prefill rows per step: 512 while other sequences' decode steps share the step and would wait; 2048 (4096
  // on matrix units) while the prompt runs alone (bigger matmuls fill the GPU better).
  const soloFit = soloRowsFit(d, maxBatch, gpu, config.hybrid, soloRowsCap(gpu, d, weights));
  const prefillChunk = opts.prefillChunk ?? (maxBatch === 1 ? soloFit : 512);
  const soloPrefillChunk = Math.max(prefillChunk, opts.soloPrefillChunk ?? opts.prefillChunk ?? soloFit);
  const bytesPerToken = kvBytesPerToken(d.nkv, d.hd, kvType, gpu.info.f16);
  const bindingPerToken = kvValueBytesPerToken(d.nkv, d.hd, kvType, gpu.info.f16);
  const budget = opts.kvBudget ?? 4 * 2 ** 30;
  const rows = soloPrefillChunk + maxBatch;
  // Only attention layers keep KV pages (recurrent layers' state is per slot, recurrent.ts); sliding layers
  // keep a ring per slot (kv_ring.ts), a fixed cost, when it is smaller than the context.
  const kvLayers = kvLayerCount(config);
  const window = config.hybrid?.window ?? 0;
  const sliding = Array.from({ length: config.dims.layers }, (_, i) => layerSpec(config, i))
    .filter(keepsKv)
    .flatMap((s, i) => s.mixer === "sliding_attention" ? [i] : []);
  const fit = (ring: { layers: number[]; pages: number } | null) => {
    const ringBytes = ring ? ring.layers.length * maxBatch * ring.pages * pageSize * bytesPerToken : 0;
    const poolLayers = kvLayers - (ring?.layers.length ?? 0);
    // One sequence must fit: per-layer pool under the binding limit, whole pool and rings under the budget.
    const fitTokens = Math.floor(
      Math.min(gpu.info.maxBinding / bindingPerToken, (budget - ringBytes) / (bytesPerToken * poolLayers)),
    );
    const want = opts.contextWindow ?? config.maxPosition;
    const contextWindow = Math.min(want, config.maxPosition, fitTokens - (fitTokens % pageSize));
    const maxPages = Math.ceil(contextWindow / pageSize);
    const poolTokens = Math.min(fitTokens, contextWindow * maxBatch);
    const numPages = Math.max(maxPages, Math.floor(poolTokens / pageSize));
    const fits = !ring ||
      (ring.pages < maxPages && ringBytes < budget &&
        maxBatch * ring.pages * pageSize * bindingPerToken <= gpu.info.maxBinding);
    return { contextWindow, maxPages, numPages, ring, fits };
  };
  const ringWanted = sliding.length && window > 0 && opts.kvRing !== false
    ? fit({ layers: sliding, pages: ringPages(window, rows, pageSize) })
    : null;
  const { contextWindow, maxPages, numPages, ring } = ringWanted?.fits ? ringWanted : fit(null);
  if (opts.contextWindow && contextWindow < opts.contextWindow) {
    throw new CapacityError(
      `context window ${opts.contextWindow} does not fit: at most ${contextWindow} tokens ` +
        `(model maximum ${config.maxPosition}, KV budget ${budget} bytes)`,
    );
  }
  const cap = {
    rows,
    decodeRows: maxBatch,
    logitRows: opts.logitRows ?? Math.max(maxBatch, 16),
    context: contextWindow,
  };
  return { maxBatch, pageSize, prefillChunk, soloPrefillChunk, contextWindow, maxPages, numPages, ring, cap };
}

/**
 * The engine's load-time sizes: batch, page size, prefill chunks, the context window the KV budget and the
 * storage-binding limit allow, the KV pool's pages, and the capacities the activation buffers are made for.
 * @module
 */
import { CapacityError } from "../errors.ts";
import type { Gpu } from "../gpu/device.ts";
import type { ArchConfig } from "../models/model.ts";
import type { EngineOptions } from "./engine.ts";
import { kvBytesPerToken, type KvCacheType, kvValueBytesPerToken } from "./kv_pool.ts";
import { kvLayerCount } from "./recurrent.ts";
import { type Capacity, soloRowsFit } from "./resources.ts";

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
): EngineSizes {
  const d = config.dims;
  const maxBatch = opts.maxBatch ?? 8;
  const pageSize = opts.pageSize ?? 16;
  // Prefill rows per step: 512 while other sequences' decode steps share the step and would wait; 2048 while
  // the prompt runs alone (bigger matmuls fill the GPU better).
  const prefillChunk = opts.prefillChunk ?? (maxBatch === 1 ? 2048 : 512);
  const soloPrefillChunk = Math.max(
    prefillChunk,
    opts.soloPrefillChunk ?? opts.prefillChunk ?? soloRowsFit(config.dims, maxBatch, gpu, config.hybrid),
  );
  const bytesPerToken = kvBytesPerToken(d.nkv, d.hd, kvType, gpu.info.f16);
  const bindingPerToken = kvValueBytesPerToken(d.nkv, d.hd, kvType, gpu.info.f16);
  const budget = opts.kvBudget ?? 4 * 2 ** 30;
  // Only attention layers keep KV pages (recurrent layers' state is per slot, recurrent.ts).
  const kvLayers = kvLayerCount(config);
  // One sequence must fit: per-layer pool under the binding limit, whole pool under the budget.
  const fitTokens = Math.floor(
    Math.min(gpu.info.maxBinding / bindingPerToken, budget / (bytesPerToken * kvLayers)),
  );
  const want = opts.contextWindow ?? config.maxPosition;
  const contextWindow = Math.min(want, config.maxPosition, fitTokens - (fitTokens % pageSize));
  if (opts.contextWindow && contextWindow < opts.contextWindow) {
    throw new CapacityError(
      `context window ${opts.contextWindow} does not fit: at most ${contextWindow} tokens ` +
        `(model maximum ${config.maxPosition}, KV budget ${budget} bytes)`,
    );
  }
  const maxPages = Math.ceil(contextWindow / pageSize);
  const poolTokens = Math.min(fitTokens, contextWindow * maxBatch);
  const numPages = Math.max(maxPages, Math.floor(poolTokens / pageSize));
  const cap = {
    rows: soloPrefillChunk + maxBatch,
    decodeRows: maxBatch,
    logitRows: opts.logitRows ?? Math.max(maxBatch, 16),
    context: contextWindow,
  };
  return { maxBatch, pageSize, prefillChunk, soloPrefillChunk, contextWindow, maxPages, numPages, cap };
}

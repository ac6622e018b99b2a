/**
 * The messages between the HTTP thread and the server's two workers: the model worker (model_worker.ts,
 * which owns the GPU: engine and scheduler) and the prompt worker (prompt_worker.ts: chat template,
 * tokenizer, grammar compilation). Both do work that blocks a thread for long (Deno's `mapAsync` blocks
 * until the GPU is idle; a 5 MB prompt tokenizes for seconds), so the HTTP thread only routes messages.
 * Errors cross as plain objects and come back as the same typed FlintError (instanceof still works).
 * @module
 */
import type { FinishReason, GenerationResult, SchedulerEvent } from "../engine/scheduler.ts";
import type { SamplingParams } from "../engine/slots.ts";
import type { KvCacheType } from "../engine/kv_pool.ts";
import type { PrefixCacheStats } from "../engine/prefix_cache.ts";
import type { MemoryCategory } from "../gpu/memory.ts";
import type { ByteDfa } from "../grammar/dfa.ts";
import * as errors from "../errors.ts";
import type { WebGpuChoice } from "../platform/mod.ts";
import type { PromptSpec, RenderedPrompt } from "./prompt.ts";

/** What the model worker is loaded with (the serializable part of EngineOptions). */
export interface ModelLoadOptions {
  dir: string;
  f16: boolean;
  /** The WebGPU implementation (`--webgpu`). */
  webgpu?: WebGpuChoice;
  maxBatch?: number;
  contextWindow?: number;
  prefillChunk?: number;
  soloPrefillChunk?: number;
  kvCache?: KvCacheType;
  stepsPerSubmit?: number;
  /** Bytes of KV pages the prefix cache may keep (default: the whole pool); 0 turns it off. */
  prefixCacheBytes?: number;
  /** The prefix cache's second tier: a folder (this model's pages go in a subfolder), or null for none. */
  prefixCacheDir?: string | null;
  /** Bytes of page files the second tier may keep (default 16 GiB); 0 turns it off. */
  prefixCacheDiskBytes?: number;
  /** Bytes the KV pool may take (default 4 GiB). */
  kvBudgetBytes?: number;
  /** Random weights of this benchmark shape (loader/synthetic.ts) with `dir`'s tokenizer. */
  synthetic?: string;
}

/** Fixed facts about the served model, sent once after load. */
export interface ModelInfo {
  /** The name clients use in `model` (the folder name). */
  name: string;
  modelType: string;
  quantization: string;
  weightBytes: number;
  maxPosition: number;
  contextWindow: number;
  /** The context window was capped below the model's maximum by the KV memory budget. */
  capped: boolean;
  vocab: number;
  adapter: string;
  /** The WebGPU implementation the engine runs on (deno, dawn). */
  webgpu: string;
  f16: boolean;
  kv8: boolean;
  kvPageBytes: number;
  kvPages: number;
  maxBatch: number;
  prefillChunk: number;
  soloPrefillChunk: number;
}

/** The prefix cache's counters (cumulative since load) and sizes, with its second tier's. */
export interface PrefixCacheReport extends PrefixCacheStats {
  /** The second tier: bytes on disk, its budget, and its folder (null: none). */
  diskBytes?: number;
  diskBudgetBytes?: number;
  dir?: string | null;
}

/** What changes while serving; pushed by the model worker after every scheduler event (and see "stats"). */
export interface ModelStats {
  /** Pages held by running requests; pages only the prefix cache holds (any request takes them back). */
  usedPages: number;
  cachedPages: number;
  freePages: number;
  queued: number;
  running: number;
  memory: Record<MemoryCategory, number>;
  /** Null when the cache is off. */
  prefixCache: PrefixCacheReport | null;
}

export interface WireGenerateRequest {
  prompt: Uint32Array;
  maxTokens: number;
  sampling: SamplingParams;
  stop: string[];
  grammar?: ByteDfa;
}

export type ModelRequest =
  | { type: "load"; opts: ModelLoadOptions }
  | { type: "submit"; id: number; req: WireGenerateRequest }
  | { type: "cancel"; id: number }
  | { type: "close" };

export type ModelReply =
  | { type: "loaded"; info: ModelInfo; stats: ModelStats }
  | { type: "load_error"; error: WireError }
  | { type: "chunk"; id: number; ids: number[]; text: string }
  | { type: "result"; id: number; result: WireResult }
  | { type: "event"; event: SchedulerEvent; stats: ModelStats }
  /** Figures that changed without a scheduler event (the prefix cache writing to disk while idle). */
  | { type: "stats"; stats: ModelStats }
  | { type: "closed" };

export type WireResult = Omit<GenerationResult, "error"> & { error?: WireError };

/** Facts the HTTP thread needs before it sends text to be tokenized. */
export interface PromptInfo {
  /**
   * UTF-16 length of the longest token's text: a prompt of C characters has at least C / this many tokens.
   */
  maxTokenChars: number;
  hasChatTemplate: boolean;
}

/** A request to render and tokenize; `grammar` asks for the automaton that constrains the output. */
export type PromptJob =
  /** `window`: when the prompt does not fit it, also count what compacting the history could not remove. */
  | { type: "render"; spec: PromptSpec; grammar: boolean; window?: number }
  | { type: "encode"; text: string };

export type PromptRequest =
  | { type: "load"; dir: string }
  | { type: "job"; id: number; job: PromptJob }
  | { type: "close" };

export type PromptReply =
  | { type: "loaded"; info: PromptInfo }
  | { type: "load_error"; error: WireError }
  | { type: "done"; id: number; prompt: WirePrompt }
  | { type: "failed"; id: number; error: WireError };

export type WirePrompt = Omit<RenderedPrompt, "ids"> & {
  ids: Uint32Array;
  grammar?: ByteDfa;
  /**
   * Tokens of the system turns, tools and last user turn alone (counted only for a prompt over the window).
   */
  fixedTokens?: number;
};

export interface WireError {
  name: string;
  message: string;
  /** The error's own plain fields (status, code, param, token counts, …). */
  fields: Record<string, string | number | boolean | null>;
}

export function toWireError(e: unknown): WireError {
  const err = e instanceof Error ? e : new Error(String(e));
  const fields: WireError["fields"] = {};
  for (const [k, v] of Object.entries(err)) {
    if (v === null || ["string", "number", "boolean"].includes(typeof v)) {
      fields[k] = v as string | number | boolean | null;
    }
  }
  return { name: err.name, message: err.message, fields };
}

/** The error as its own class again, so the one HTTP error handler maps it as if it were thrown here. */
export function fromWireError(w: WireError): Error {
  const Cls = (errors as Record<string, unknown>)[w.name];
  if (typeof Cls !== "function" || !(Cls.prototype instanceof Error)) {
    return Object.assign(new Error(w.message), { name: w.name });
  }
  const e = Object.create(Cls.prototype) as Error & Record<string, unknown>;
  const own = { ...w.fields, message: w.message, name: w.name, stack: `${w.name}: ${w.message}` };
  for (const [k, v] of Object.entries(own)) {
    Object.defineProperty(e, k, { value: v, enumerable: k !== "stack", writable: true, configurable: true });
  }
  return e;
}

export type { FinishReason };

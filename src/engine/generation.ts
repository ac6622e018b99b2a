/**
 * What a request is and what it returns: the scheduler's public types, and `Generation`, the handle a caller
 * streams text from or awaits.
 * @module
 */
import type { ByteDfa } from "../grammar/dfa.ts";
import type { PageFolder } from "./prefix_store.ts";
import type { SamplingParams } from "./slots.ts";

export interface GenerateRequest {
  /** Prompt token ids (at least one). */
  prompt: number[];
  /** New tokens at most. */
  maxTokens: number;
  sampling?: SamplingParams;
  stop?: string[];
  signal?: AbortSignal;
  /**
   * Constrains the output to this automaton's language (masked on the GPU every step): the output ends at
   * an accepting state, by EOS or within max tokens when the automaton's dist[0] ≤ maxTokens.
   */
  grammar?: ByteDfa;
}

export type FinishReason = "stop" | "length" | "cancelled" | "error";

export interface GenerationResult {
  tokenIds: number[];
  text: string;
  finishReason: FinishReason;
  /** The stop string that ended generation, if any. */
  stopSequence: string | null;
  promptTokens: number;
  /** Prompt tokens read from the prefix cache instead of prefilled. */
  cachedTokens: number;
  /** Sampled tokens, including a final EOS. */
  completionTokens: number;
  ttftMs: number;
  prefillTps: number;
  decodeTps: number;
  totalMs: number;
  error?: Error;
}

export interface TokenChunk {
  ids: number[];
  text: string;
}

export type SchedulerEvent =
  | { type: "start"; id: number; promptTokens: number }
  /** Its prefill starts: `tokens` of the prompt came from the prefix cache, its first pages are held. */
  | { type: "cached"; id: number; tokens: number; total: number }
  | { type: "prefill"; id: number; processed: number; total: number }
  | { type: "finish"; id: number; reason: FinishReason; completionTokens: number; ttftMs: number };

export interface SchedulerOptions {
  /** Decode steps encoded into one submit (default 16). 1 gives the one-step-at-a-time loop. */
  stepsPerSubmit?: number;
  /** A prefill on an idle GPU submits its first layers before encoding the rest (default true). */
  headStart?: boolean;
  /**
   * Bytes of KV pages the prefix cache may keep (default: the whole pool, since any request takes cached
   * pages back before it is refused); 0 turns the cache off.
   */
  prefixCacheBytes?: number;
  /**
   * The prefix cache's second tier: a folder for page files of this model (`fingerprint`), the bytes they
   * may take, and how long the GPU stays idle before cached pages are written (default 1000 ms).
   */
  prefixFolder?: { folder: PageFolder; fingerprint: string; budgetBytes: number; idleMs?: number };
}

/** The result of a request that failed before or while it ran: nothing generated, the error kept. */
export function failedResult(promptTokens: number, error: Error): GenerationResult {
  return {
    tokenIds: [],
    text: "",
    finishReason: "error",
    stopSequence: null,
    promptTokens,
    cachedTokens: 0,
    completionTokens: 0,
    ttftMs: 0,
    prefillTps: 0,
    decodeTps: 0,
    totalMs: 0,
    error,
  };
}

/** A running request: stream its text with `chunks`, or await `result`. */
export class Generation {
  readonly result: Promise<GenerationResult>;
  #resolve!: (r: GenerationResult) => void;
  #pending: TokenChunk[] = [];
  #wake: (() => void) | null = null;
  #closed = false;

  constructor(readonly id: number) {
    this.result = new Promise((r) => (this.#resolve = r));
  }

  /** Text and ids as they are read back (never half a UTF-8 character, never part of a stop string). */
  async *chunks(): AsyncGenerator<TokenChunk> {
    while (true) {
      if (this.#pending.length) {
        yield this.#pending.shift()!;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((r) => (this.#wake = r));
    }
  }

  /** @internal */
  push(c: TokenChunk): void {
    this.#pending.push(c);
    this.#wake?.();
  }
  /** @internal */
  close(r: GenerationResult): void {
    this.#closed = true;
    this.#wake?.();
    this.#resolve(r);
  }
}

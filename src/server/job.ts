/**
 * One generation as both APIs see it: submit to the scheduler, then a stream of output pieces (text and
 * parsed tool calls) and the final result. Streaming and non-streaming handlers consume the same pieces.
 * @module
 */
import type { GenerationResult } from "../engine/scheduler.ts";
import type { SamplingParams } from "../engine/slots.ts";
import { ContextWindowError } from "../errors.ts";
import type { Served } from "./host.ts";
import type { Metrics } from "./metrics.ts";
import type { RenderedPrompt } from "./prompt.ts";
import { ToolCallParser, type ToolPiece } from "./tools.ts";

export interface JobSpec {
  prompt: RenderedPrompt;
  /** null: whatever room the context window leaves. */
  maxTokens: number | null;
  sampling: SamplingParams;
  stop: string[];
  signal: AbortSignal;
}

/** The tokens the request may generate; refuses (never truncates) a prompt that does not fit. */
export function budget(promptTokens: number, maxTokens: number | null, contextWindow: number): number {
  const want = maxTokens ?? contextWindow - promptTokens;
  if (want < 1 || promptTokens + want > contextWindow) {
    throw new ContextWindowError(promptTokens, maxTokens ?? 1, contextWindow);
  }
  return want;
}

export class Job {
  readonly id: number;
  readonly promptTokens: number;
  readonly #gen;
  readonly #parser: ToolCallParser | null;
  readonly #metrics: Metrics;

  constructor(served: Served, readonly spec: JobSpec, metrics: Metrics) {
    const ids = spec.prompt.ids;
    const maxTokens = budget(ids.length, spec.maxTokens, served.engine.contextWindow);
    this.#gen = served.scheduler.submit({
      prompt: ids,
      maxTokens,
      sampling: spec.sampling,
      stop: spec.stop,
      signal: spec.signal,
    });
    this.id = this.#gen.id;
    this.promptTokens = ids.length;
    this.#metrics = metrics;
    this.#parser = spec.prompt.parseTools ? new ToolCallParser() : null;
  }

  /** Output pieces as they become final. A forced call prefix is parsed as if the model had written it. */
  async *pieces(): AsyncGenerator<ToolPiece> {
    const p = this.#parser;
    if (p && this.spec.prompt.forced) yield* p.push(this.spec.prompt.forced);
    for await (const c of this.#gen.chunks()) {
      if (!c.text) continue;
      if (p) yield* p.push(c.text);
      else yield { type: "text", text: c.text };
    }
    if (p) yield* p.flush();
  }

  /** Resolves when generation ends; records metrics; rethrows a scheduler error. */
  async result(): Promise<GenerationResult> {
    const r = await this.#gen.result;
    this.#metrics.generation(r);
    if (r.finishReason === "error") throw r.error ?? new Error("generation failed");
    return r;
  }
}

/** Sampling defaults of both APIs: temperature 1, and a fresh seed unless one is given. */
export function sampling(o: Partial<Omit<SamplingParams, "seed">> & { seed?: number }): SamplingParams {
  return {
    temperature: o.temperature ?? 1,
    topP: o.topP ?? 1,
    topK: o.topK ?? 0,
    minP: o.minP ?? 0,
    seed: o.seed !== undefined
      ? Number(BigInt.asUintN(32, BigInt(o.seed)))
      : Math.floor(Math.random() * 2 ** 32),
    frequencyPenalty: o.frequencyPenalty ?? 0,
    presencePenalty: o.presencePenalty ?? 0,
  };
}

export function randomId(prefix: string): string {
  const b = crypto.getRandomValues(new Uint8Array(12));
  return prefix + [...b].map((x) => x.toString(36).padStart(2, "0")).join("").slice(0, 24);
}

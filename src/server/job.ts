/**
 * One generation as both APIs see it: submit to the scheduler, then a stream of output pieces (text and
 * parsed tool calls) and the final result. Streaming and non-streaming handlers consume the same pieces.
 * @module
 */
import type { GenerationResult } from "../engine/scheduler.ts";
import type { SamplingParams } from "../engine/slots.ts";
import { CancelledError, ContextWindowError, ValidationError } from "../errors.ts";
import type { Served } from "./host.ts";
import type { Metrics } from "./metrics.ts";
import { fixedSpec, type PromptSpec, specChars } from "./prompt.ts";
import type { NamedEvent, SseSink } from "./sse.ts";
import { ToolCallParser, type ToolPiece } from "./tools.ts";
import type { WirePrompt } from "./worker_protocol.ts";

export interface JobSpec {
  prompt: WirePrompt;
  /** null: whatever room the context window leaves. */
  maxTokens: number | null;
  sampling: SamplingParams;
  stop: string[];
  signal: AbortSignal;
}

/**
 * The tokens the request may generate: what it asked for, clamped to the room the window leaves (it then
 * ends with "length" when the window fills). Only a prompt that leaves no room is refused, never truncated.
 */
export function budget(
  promptTokens: number,
  maxTokens: number | null,
  contextWindow: number,
  fixedTokens = 0,
): number {
  const room = contextWindow - promptTokens;
  if (room < 1) {
    throw new ContextWindowError(promptTokens, 0, contextWindow, {
      compactable: fixedTokens < contextWindow,
    });
  }
  return Math.min(maxTokens ?? room, room);
}

/**
 * Refuses, before any tokenizing, a conversation that cannot fit: no token is longer than the longest
 * vocabulary entry, so its characters bound its tokens from below (a 30 MB body fails in microseconds).
 */
export function checkLength(served: Served, spec: PromptSpec | string): void {
  const window = served.info.contextWindow;
  const atLeast = (s: PromptSpec | string) =>
    Math.ceil((typeof s === "string" ? s.length : specChars(s)) / served.prompts.info.maxTokenChars);
  const n = atLeast(spec);
  if (n >= window) {
    const compactable = typeof spec !== "string" && atLeast(fixedSpec(spec)) < window;
    throw new ContextWindowError(n, 0, window, { lowerBound: true, compactable });
  }
}

/** Renders and tokenizes a conversation in the prompt worker, after the cheap length check. */
export function renderPrompt(served: Served, spec: PromptSpec): Promise<WirePrompt> {
  checkLength(served, spec);
  return served.prompts.render(spec, { window: served.info.contextWindow });
}

export class Job {
  readonly id: number;
  readonly promptTokens: number;
  readonly #gen;
  readonly #parser: ToolCallParser | null;
  readonly #metrics: Metrics;

  constructor(served: Served, readonly spec: JobSpec, metrics: Metrics) {
    const ids = spec.prompt.ids;
    const maxTokens = budget(ids.length, spec.maxTokens, served.info.contextWindow, spec.prompt.fixedTokens);
    const grammar = spec.prompt.grammar;
    // Constrained output can always be finished within dist[0] + 1 tokens (the last for EOS), not fewer.
    if (grammar && maxTokens < grammar.dist[0] + 1) {
      throw new ValidationError(
        `max_tokens ${maxTokens} is too small for the required output (a forced tool call or JSON): ` +
          `it needs ` +
          `at least ${grammar.dist[0] + 1}`,
        "max_tokens",
      );
    }
    this.#gen = served.model.submit({
      prompt: ids,
      maxTokens,
      sampling: spec.sampling,
      stop: spec.stop,
      ...(spec.prompt.grammar ? { grammar: spec.prompt.grammar } : {}),
    }, spec.signal);
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
    // One line per request, as local servers print: what an agent's turn cost.
    console.log(
      `[flint] #${this.id} ${r.finishReason}: prompt ${r.promptTokens} tokens, ${r.completionTokens} new` +
        (r.ttftMs
          ? `, first token ${(r.ttftMs / 1000).toFixed(2)} s (${Math.round(r.prefillTps)} tok/s)`
          : "") +
        (r.decodeTps ? `, ${Math.round(r.decodeTps)} tok/s decode` : ""),
    );
    if (r.finishReason === "error") throw r.error ?? new Error("generation failed");
    return r;
  }

  /** A non-streamed reply: every piece, then the result; a client that left is a CancelledError. */
  async whole(): Promise<{ pieces: ToolPiece[]; result: GenerationResult }> {
    const pieces: ToolPiece[] = [];
    for await (const p of this.pieces()) pieces.push(p);
    const result = await this.result();
    if (result.finishReason === "cancelled") throw new CancelledError("the client disconnected");
    return { pieces, result };
  }

  /**
   * The producer of a stream of named SSE events (Anthropic, Responses): `start`, one batch per piece,
   * `end`; nothing more once the client left. `release` ends the request's lease.
   */
  namedEvents(events: NamedEventSource, release: () => void): (sink: SseSink) => Promise<void> {
    return async (sink) => {
      const send = (list: NamedEvent[]) => list.forEach(([e, d]) => sink.send(d, e));
      try {
        send(events.start());
        for await (const p of this.pieces()) send(events.piece(p));
        const r = await this.result();
        if (r.finishReason !== "cancelled") send(events.end(r));
      } finally {
        release();
      }
    };
  }
}

/** What a stream of named events is built from (anthropic_wire.ts, responses_wire.ts). */
export interface NamedEventSource {
  start(): NamedEvent[];
  piece(p: ToolPiece): NamedEvent[];
  end(r: GenerationResult): NamedEvent[];
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

/**
 * The HTTP thread's side of the two workers (worker_protocol.ts): `ModelClient` submits generations to the
 * model worker and streams them back as `Generation`s; `PromptClient` renders and tokenizes prompts in the
 * prompt worker. Neither ever blocks this thread, so /health, SSE pings and new connections are answered
 * while the GPU works. A worker that dies fails what it had in flight with a DeviceError.
 * @module
 */
import { failedResult } from "../engine/generation.ts";
import { Generation, type SchedulerEvent } from "../engine/scheduler.ts";
import { DeviceError } from "../errors.ts";
import type { PromptSpec } from "./prompt.ts";
import {
  fromWireError,
  type ModelInfo,
  type ModelLoadOptions,
  type ModelReply,
  type ModelRequest,
  type ModelStats,
  type PromptInfo,
  type PromptJob,
  type PromptReply,
  type PromptRequest,
  type WireGenerateRequest,
  type WirePrompt,
} from "./worker_protocol.ts";

function spawn(file: string, name: string): Worker {
  return new Worker(new URL(file, import.meta.url).href, { type: "module", name });
}

/** Resolves with the worker's first reply of type loaded, or rejects with its load error. */
function loaded<R extends { type: string }>(w: Worker, what: string): Promise<R> {
  return new Promise((resolve, reject) => {
    w.onmessage = (ev: MessageEvent<R & { error?: any }>) => {
      if (ev.data.type === "loaded") resolve(ev.data);
      else if (ev.data.type === "load_error") reject(fromWireError(ev.data.error));
    };
    w.onerror = (ev) => {
      ev.preventDefault();
      reject(new DeviceError(`the ${what} worker failed while loading: ${ev.message}`));
    };
  });
}

export class ModelClient {
  readonly listeners = new Set<(e: SchedulerEvent) => void>();
  #stats: ModelStats;
  #nextId = 1;
  #gens = new Map<number, { gen: Generation; promptTokens: number }>();
  #dead: Error | null = null;
  #closed: (() => void) | null = null;

  private constructor(readonly worker: Worker, readonly info: ModelInfo, stats: ModelStats) {
    this.#stats = stats;
    worker.onmessage = (ev: MessageEvent<ModelReply>) => {
      try {
        this.#receive(ev.data);
      } catch (e) {
        console.error("[flint] a message from the model worker could not be handled:", e);
      }
    };
    worker.onerror = (ev) => {
      ev.preventDefault();
      this.#die(new DeviceError(`the model worker failed: ${ev.message}`));
    };
  }

  /** Starts a model worker and loads the model there (weights, KV pool, kernel warm-up). */
  static async open(opts: ModelLoadOptions): Promise<ModelClient> {
    const w = spawn("./model_worker.ts", "flint-model");
    const ready = loaded<Extract<ModelReply, { type: "loaded" }>>(w, "model");
    w.postMessage({ type: "load", opts } satisfies ModelRequest);
    try {
      const m = await ready;
      return new ModelClient(w, m.info, m.stats);
    } catch (e) {
      w.terminate();
      throw e;
    }
  }

  /** Why the worker stopped serving (a crash or lost device), or null while it serves. */
  get failure(): string | null {
    return this.#dead?.message ?? null;
  }

  /** The latest pool and queue figures (updated with every scheduler event). */
  get stats(): ModelStats {
    return this.#stats;
  }

  /** Starts a generation; `signal` cancels it (the worker drops it at its next step). */
  submit(req: WireGenerateRequest, signal: AbortSignal): Generation {
    const id = this.#nextId++;
    const gen = new Generation(id);
    if (this.#dead) {
      gen.close(failedResult(req.prompt.length, this.#dead));
      return gen;
    }
    this.#gens.set(id, { gen, promptTokens: req.prompt.length });
    const transfer = req.grammar
      ? [req.grammar.next.buffer, req.grammar.dist.buffer, req.grammar.accept.buffer]
      : [];
    this.worker.postMessage({ type: "submit", id, req } satisfies ModelRequest, transfer);
    const cancel = () => this.worker.postMessage({ type: "cancel", id } satisfies ModelRequest);
    if (signal.aborted) cancel();
    else signal.addEventListener("abort", cancel, { once: true });
    gen.result.finally(() => signal.removeEventListener("abort", cancel));
    return gen;
  }

  /** Finishes what runs, then ends the worker and frees the device. */
  async close(): Promise<void> {
    if (this.#dead) return;
    const done = new Promise<void>((r) => (this.#closed = r));
    this.worker.postMessage({ type: "close" } satisfies ModelRequest);
    await done;
    this.worker.terminate();
    this.#dead = new DeviceError("the model was unloaded");
  }

  #receive(m: ModelReply): void {
    switch (m.type) {
      case "chunk":
        this.#gens.get(m.id)?.gen.push({ ids: m.ids, text: m.text });
        return;
      case "result": {
        const g = this.#gens.get(m.id);
        if (!g) return;
        this.#gens.delete(m.id);
        const { error, ...rest } = m.result;
        g.gen.close({ ...rest, ...(error ? { error: fromWireError(error) } : {}) });
        return;
      }
      case "event":
        this.#stats = m.stats;
        for (const l of this.listeners) l(m.event);
        return;
      case "stats":
        this.#stats = m.stats;
        return;
      case "closed":
        this.#closed?.();
        return;
    }
  }

  #die(e: Error): void {
    if (this.#dead) return;
    this.#dead = e;
    console.error(`[flint] ${e.message}`);
    for (const [, g] of this.#gens) g.gen.close(failedResult(g.promptTokens, e));
    this.#gens.clear();
    this.#closed?.();
  }
}

export class PromptClient {
  #nextId = 1;
  #pending = new Map<number, { resolve: (p: WirePrompt) => void; reject: (e: Error) => void }>();

  private constructor(readonly worker: Worker, readonly info: PromptInfo) {
    worker.onmessage = (ev: MessageEvent<PromptReply>) => {
      const m = ev.data;
      if (m.type !== "done" && m.type !== "failed") return;
      const p = this.#pending.get(m.id);
      this.#pending.delete(m.id);
      if (m.type === "done") p?.resolve(m.prompt);
      else p?.reject(fromWireError(m.error));
    };
    worker.onerror = (ev) => {
      ev.preventDefault();
      const e = new DeviceError(`the prompt worker failed: ${ev.message}`);
      for (const p of this.#pending.values()) p.reject(e);
      this.#pending.clear();
    };
  }

  /** Starts a prompt worker with the model folder's tokenizer and chat template. */
  static async open(dir: string): Promise<PromptClient> {
    const w = spawn("./prompt_worker.ts", "flint-prompt");
    const ready = loaded<Extract<PromptReply, { type: "loaded" }>>(w, "prompt");
    w.postMessage({ type: "load", dir } satisfies PromptRequest);
    try {
      return new PromptClient(w, (await ready).info);
    } catch (e) {
      w.terminate();
      throw e;
    }
  }

  /** The conversation through the chat template, tokenized, with the output grammar it asks for. */
  render(spec: PromptSpec, opts: { grammar?: boolean; window?: number } = {}): Promise<WirePrompt> {
    return this.#run({ type: "render", spec, grammar: opts.grammar ?? true, window: opts.window });
  }

  async encode(text: string): Promise<Uint32Array> {
    return (await this.#run({ type: "encode", text })).ids;
  }

  close(): void {
    this.worker.postMessage({ type: "close" } satisfies PromptRequest);
  }

  #run(job: PromptJob): Promise<WirePrompt> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: "job", id, job } satisfies PromptRequest);
    });
  }
}

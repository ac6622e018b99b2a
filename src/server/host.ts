/**
 * The served model: one Engine and the one Scheduler that owns its GPU. Requests hold a lease while they
 * run; a model swap closes the gate, waits for the leases to drain, loads the new model next to the old one,
 * and only then lets the old one go, so a failed load leaves the old model serving.
 * @module
 */
import { Engine, type EngineOptions } from "../engine/engine.ts";
import { Scheduler, type SchedulerEvent } from "../engine/scheduler.ts";
import { ConflictError, ValidationError } from "../errors.ts";
import type { Tokenizer } from "../loader/tokenizer.ts";
import type { ModelSource } from "../platform/mod.ts";

export interface HostOptions {
  /** Engine options for every load (max batch, prefill chunk, context window, …). */
  engine: EngineOptions;
  stepsPerSubmit?: number;
}

export interface Served {
  engine: Engine;
  scheduler: Scheduler;
  tokenizer: Tokenizer;
  /** The name clients use in `model` (the folder name). */
  name: string;
  /** The context window was capped below the model's maximum by the KV memory budget. */
  capped: boolean;
}

export type HostEvent = SchedulerEvent | { type: "model"; model: string; context_window: number };

export class ModelHost {
  readonly listeners = new Set<(e: HostEvent) => void>();
  #served: Served;
  #leases = 0;
  #drained: (() => void) | null = null;
  #gate: Promise<void> | null = null;
  #swapping = false;

  private constructor(served: Served, readonly opts: HostOptions) {
    this.#served = served;
    this.#attach(served);
  }

  static async open(source: ModelSource, opts: HostOptions): Promise<ModelHost> {
    return new ModelHost(await ModelHost.#load(source, opts, opts.engine.contextWindow), opts);
  }

  static async #load(source: ModelSource, opts: HostOptions, contextWindow?: number): Promise<Served> {
    const engine = await Engine.load(source, { ...opts.engine, contextWindow });
    if (!engine.tokenizer) {
      engine.destroy();
      throw new ValidationError(`${source.name} has no tokenizer.json; the server needs one`, "model");
    }
    return {
      engine,
      scheduler: new Scheduler(engine, { stepsPerSubmit: opts.stepsPerSubmit }),
      tokenizer: engine.tokenizer,
      name: engine.info.name,
      capped: engine.contextWindow < engine.info.maxPosition,
    };
  }

  get served(): Served {
    return this.#served;
  }
  get swapping(): boolean {
    return this.#swapping;
  }
  get inFlight(): number {
    return this.#leases;
  }

  /** Waits out a swap in progress, then pins the current model until `release`. */
  async acquire(): Promise<{ served: Served; release: () => void }> {
    while (this.#gate) await this.#gate;
    this.#leases++;
    let done = false;
    return {
      served: this.#served,
      release: () => {
        if (done) return;
        done = true;
        if (--this.#leases === 0) this.#drained?.();
      },
    };
  }

  /** Swaps in another model. In-flight requests finish first; a failed load keeps the old model. */
  async swap(source: ModelSource, contextWindow?: number): Promise<Served> {
    if (this.#swapping) throw new ConflictError("a model swap is already in progress");
    this.#swapping = true;
    let open!: () => void;
    this.#gate = new Promise((r) => (open = r));
    try {
      if (this.#leases > 0) await new Promise<void>((r) => (this.#drained = r));
      this.#drained = null;
      const next = await ModelHost.#load(source, this.opts, contextWindow);
      const old = this.#served;
      this.#served = next;
      this.#attach(next);
      await old.scheduler.close();
      old.engine.destroy();
      this.#emit({ type: "model", model: next.name, context_window: next.engine.contextWindow });
      return next;
    } finally {
      this.#swapping = false;
      this.#gate = null;
      open();
    }
  }

  async close(): Promise<void> {
    await this.#served.scheduler.close();
    this.#served.engine.destroy();
  }

  #attach(s: Served): void {
    s.scheduler.listeners.add((e) => this.#emit(e));
  }

  #emit(e: HostEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        console.error("[flint] event listener failed:", err);
      }
    }
  }
}
